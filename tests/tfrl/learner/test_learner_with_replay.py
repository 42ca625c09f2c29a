"""The learner fed by ReplayDataset on two replicas, priority updates from TD errors, and the
two ways of publishing weights (Ray object store, variable-container replay table)."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from replay import errors as replay_errors
from replay import rate_limiters, selectors, specs
from replay.dataset import ReplayDataset
from replay.table import Table
from tfrl import errors
from tfrl.learner import (MirroredLearner, PriorityUpdater, RayWeightsPublisher, ReplayWeightsPublisher,
                          ReplayWeightsReader, mirrored_strategy, variable_container_table)

pytestmark = pytest.mark.timeout(180)

SIGNATURE = {"x": specs.TensorSpec((3,), np.float32), "y": specs.TensorSpec((), np.float32)}


class Regressor:
    def __init__(self):
        self.model = tf_keras.Sequential([tf_keras.layers.Dense(4, activation="tanh"), tf_keras.layers.Dense(1)])
        self.model.build((None, 3))
        self.optimizer = tf_keras.optimizers.SGD(0.05)

    @property
    def trainable_variables(self):
        return self.model.trainable_variables

    def loss_and_stats(self, batch):
        error = self.model(batch["x"])[:, 0] - batch["y"]
        return tf.reduce_mean(tf.square(error)), {}, {"td_error": error}


def _prioritized_table():
    return Table("prioritized", selectors.Prioritized(0.8, seed=1), selectors.Fifo(), 1000,
                 rate_limiters.MinSize(1), signature=SIGNATURE)


def _fill(client, n):
    rng = np.random.default_rng(0)
    with client.trajectory_writer(1) as writer:
        for _ in range(n):
            x = rng.normal(size=3).astype(np.float32)
            writer.create_item("prioritized", 1.0, writer.append({"x": x, "y": np.float32(x.sum())}))
        writer.flush()


def test_td_errors_become_priority_updates_on_the_server(start_server):
    server = start_server([_prioritized_table()])
    client = server.localhost_client()
    _fill(client, 100)
    updater = PriorityUpdater(client, "prioritized")
    seen = []

    def on_step(output):
        seen.append(output)
        updater(output)

    learner = MirroredLearner(Regressor, strategy=mirrored_strategy(["/cpu:0", "/cpu:1"]),
                              steps_per_call=3, on_step=on_step)

    def dataset_fn(input_context):
        return ReplayDataset.from_table_signature(client.address, "prioritized", 16).batch(
            input_context.get_per_replica_batch_size(16))

    iterator = iter(learner.distribute_datasets_from_function(dataset_fn))
    assert len(learner.train(iterator)) == 3
    assert [o.batch_size for o in seen] == [16, 16, 16]
    expected = {}
    for output in seen:
        assert output.info.key.dtype == np.uint64 and len(output.info.key) == 16
        expected.update({int(k): abs(float(e)) + 1e-6 for k, e in zip(output.info.key, output.per_sample["td_error"])})
    assert updater.num_updates == sum(len(set(o.info.key.tolist())) for o in seen)
    checked = 0
    for sample in client.sample("prioritized", 200, emit_timesteps=False, unpack_as_table_signature=True):
        key = int(sample.info.key)
        want = expected.get(key, 1.0)
        assert sample.info.priority == pytest.approx(want, rel=1e-5)
        checked += key in expected
    assert checked > 0


def test_priority_updater_needs_sample_info_and_td_errors():
    from tfrl.learner import StepOutput

    updater = PriorityUpdater(client=None, table="t")
    with pytest.raises(errors.InvalidConfigError, match="SampleInfo"):
        updater(StepOutput(step=1, batch_size=2, stats={}, per_sample={"td_error": np.zeros(2)}, info=None))


def test_variable_container_table_serves_the_newest_weights(start_server):
    server = start_server([variable_container_table("weights")])
    client = server.localhost_client()
    reader = ReplayWeightsReader(client, "weights")
    with pytest.raises(replay_errors.DeadlineExceededError):
        reader.read(timeout=0.2)
    publisher = ReplayWeightsPublisher(client, "weights")
    first = [np.ones((2, 3), np.float32), np.arange(4, dtype=np.float32)]
    second = [w * 2 for w in first]
    assert publisher.publish(first) == 1
    version, weights = reader.read(timeout=5)
    assert version == 1
    for got, want in zip(weights, first):
        np.testing.assert_array_equal(got, want)
    assert reader.read_if_newer(timeout=5) is None  # nothing newer than version 1
    assert publisher.publish(second) == 2
    newer = reader.read_if_newer(timeout=5)
    for got, want in zip(newer, second):
        np.testing.assert_array_equal(got, want)
    # Reading never removes the weights, and only the newest version is kept.
    for _ in range(3):
        assert reader.read(timeout=5)[0] == 2
    info = client.server_info()["weights"]
    assert info.current_size == 1 and info.max_size == 1
    with pytest.raises(errors.InvalidConfigError, match="list of arrays"):
        publisher.publish({"not": "a list"})
    assert publisher.version == 2


def test_learner_weights_reach_a_ray_actor_through_the_object_store(ray_session):
    ray = ray_session

    @ray.remote(num_cpus=0)
    class Actor:
        def __init__(self):
            self.weights = None

        def set_weights(self, weights):
            self.weights = weights
            return [float(np.sum(w)) for w in weights]

    learner = MirroredLearner(Regressor, strategy=mirrored_strategy(["/cpu:0"]))
    publisher = RayWeightsPublisher()
    ref = publisher.publish(learner.get_weights())
    actor = Actor.remote()
    sums = ray.get(actor.set_weights.remote(ref), timeout=60)
    np.testing.assert_allclose(sums, [float(np.sum(w)) for w in learner.get_weights()], rtol=1e-6)
    assert publisher.version == 1 and publisher.latest_ref == ref
