"""MirroredLearner on the two logical CPU devices: replica-count invariance, mean reduction,
K steps per call, and the per-step hook with per-sample info and outputs."""
import collections

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tfrl import errors
from tfrl.learner import MirroredLearner, StepOutput, mean_stats, mirrored_strategy

pytestmark = pytest.mark.timeout(300)

FakeInfo = collections.namedtuple("FakeInfo", ["key", "priority"])
Sample = collections.namedtuple("Sample", ["info", "data"])

INPUT_DIM = 3


def _initial_weights(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(INPUT_DIM, 4)).astype(np.float32), np.zeros(4, np.float32),
            rng.normal(size=(4, 1)).astype(np.float32), np.zeros(1, np.float32)]


class Regressor:
    """A two-layer tf_keras regressor with a squared-error loss and per-sample errors."""

    def __init__(self, learning_rate=0.1, optimizer=None):
        self.model = tf_keras.Sequential([tf_keras.layers.Dense(4, activation="tanh"),
                                          tf_keras.layers.Dense(1)])
        self.model.build((None, INPUT_DIM))
        self.model.set_weights(_initial_weights())
        self.optimizer = optimizer or tf_keras.optimizers.SGD(learning_rate)

    @property
    def trainable_variables(self):
        return self.model.trainable_variables

    def loss_and_stats(self, batch):
        error = self.model(batch["x"])[:, 0] - batch["y"]
        loss = tf.reduce_mean(tf.square(error))
        return loss, {"mean_abs_error": tf.reduce_mean(tf.abs(error))}, {"td_error": error}


def _global_batches(num_batches, batch_size, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_batches * batch_size, INPUT_DIM)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3).astype(np.float32)
    return {"x": x, "y": y}


def _reference_training(data, batch_size, learning_rate=0.1):
    """Plain eager training without any strategy: SGD on the mean loss of each global batch."""
    model = Regressor(learning_rate)
    losses = []
    n = len(data["y"])
    for start in range(0, n, batch_size):
        batch = {k: tf.constant(v[start:start + batch_size]) for k, v in data.items()}
        with tf.GradientTape() as tape:
            loss, _, _ = model.loss_and_stats(batch)
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
    return [v.numpy() for v in model.trainable_variables], losses


def _two_devices():
    return mirrored_strategy(["/cpu:0", "/cpu:1"])


def _one_device():
    return mirrored_strategy(["/cpu:0"])


def _train_all(learner, iterator):
    outputs = []
    while True:
        step_outputs = learner.train(iterator)
        if not step_outputs:
            return outputs
        outputs.extend(step_outputs)


def test_conftest_gives_two_cpu_devices():
    assert len(tf.config.list_logical_devices("CPU")) >= 2


@pytest.mark.parametrize("global_batch", [8, 7])  # 7: replicas get unequal shares (4 + 3)
def test_two_replicas_and_one_replica_reach_the_same_weights_as_plain_training(global_batch):
    data = _global_batches(6, global_batch)
    expected_weights, expected_losses = _reference_training(data, global_batch)
    results = {}
    for name, strategy in (("two", _two_devices()), ("one", _one_device())):
        learner = MirroredLearner(Regressor, strategy=strategy, steps_per_call=4)
        dataset = tf.data.Dataset.from_tensor_slices(data).batch(global_batch)
        outputs = _train_all(learner, iter(learner.distribute_dataset(dataset)))
        assert len(outputs) == 6
        assert [o.batch_size for o in outputs] == [global_batch] * 6
        results[name] = (learner.get_weights(), [o.stats["loss"] for o in outputs])
    assert _two_devices().num_replicas_in_sync == 2
    for name, (weights, losses) in results.items():
        # A sum over replicas instead of a mean would double the 2-replica gradients and loss.
        np.testing.assert_allclose(losses, expected_losses, rtol=1e-5, atol=1e-6, err_msg=name)
        for got, want in zip(weights, expected_weights):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(results["two"][0][0], _initial_weights()[0])


def test_per_replica_datasets_from_function_match_global_batches():
    per_replica = 4
    data = _global_batches(5, 2 * per_replica)
    expected_weights, _ = _reference_training(data, 2 * per_replica)
    learner = MirroredLearner(Regressor, strategy=_two_devices(), steps_per_call=2)
    contexts = []

    def dataset_fn(input_context):
        contexts.append(input_context)
        batch = input_context.get_per_replica_batch_size(2 * per_replica)
        return tf.data.Dataset.from_tensor_slices(data).batch(batch)

    outputs = _train_all(learner, iter(learner.distribute_datasets_from_function(dataset_fn)))
    assert [o.batch_size for o in outputs] == [2 * per_replica] * 5
    assert contexts and contexts[0].num_replicas_in_sync == 2
    for got, want in zip(learner.get_weights(), expected_weights):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_k_steps_per_call_and_a_single_trace():
    traces = []

    class CountingRegressor(Regressor):
        def loss_and_stats(self, batch):
            traces.append(1)  # runs only while tracing
            return super().loss_and_stats(batch)

    learner = MirroredLearner(CountingRegressor, strategy=_two_devices(), steps_per_call=4)
    dataset = tf.data.Dataset.from_tensor_slices(_global_batches(10, 8)).batch(8)
    iterator = iter(learner.distribute_dataset(dataset))
    first = learner.train(iterator)
    traces_after_first_call = len(traces)
    steps_per_call = [len(first)] + [len(learner.train(iterator)) for _ in range(3)]
    assert steps_per_call == [4, 4, 2, 0]
    assert len(traces) == traces_after_first_call
    assert learner.num_steps == 10


def test_hook_gets_per_sample_info_and_outputs_in_global_batch_order():
    global_batch, num_batches = 6, 3
    data = _global_batches(num_batches, global_batch)
    keys = np.arange(100, 100 + global_batch * num_batches, dtype=np.uint64)
    priorities = np.linspace(0.5, 2.0, len(keys))
    samples = Sample(FakeInfo(keys, priorities), data)
    seen = []
    learner = MirroredLearner(Regressor, strategy=_two_devices(), steps_per_call=2,
                              on_step=seen.append)
    reference = Regressor()
    dataset = tf.data.Dataset.from_tensor_slices(samples).batch(global_batch)
    outputs = _train_all(learner, iter(learner.distribute_dataset(dataset)))
    assert seen == outputs and len(seen) == num_batches
    for step, output in enumerate(seen):
        assert isinstance(output, StepOutput) and output.step == step + 1
        rows = slice(step * global_batch, (step + 1) * global_batch)
        np.testing.assert_array_equal(output.info.key, keys[rows])
        np.testing.assert_allclose(output.info.priority, priorities[rows])
        # The per-sample outputs are the errors under the weights before this step.
        batch = {k: tf.constant(v[rows]) for k, v in data.items()}
        loss, stats, per_sample = reference.loss_and_stats(batch)
        np.testing.assert_allclose(output.per_sample["td_error"], per_sample["td_error"].numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(output.stats["mean_abs_error"], float(stats["mean_abs_error"]),
                                   rtol=1e-5)
        np.testing.assert_allclose(output.stats["loss"], float(loss), rtol=1e-5)
        with tf.GradientTape() as tape:
            loss, _, _ = reference.loss_and_stats(batch)
        grads = tape.gradient(loss, reference.trainable_variables)
        reference.optimizer.apply_gradients(zip(grads, reference.trainable_variables))
    averaged = mean_stats(seen)
    assert averaged["loss"] == pytest.approx(np.mean([o.stats["loss"] for o in seen]))


def test_mean_stats_leaves_out_the_steps_that_did_not_compute_a_statistic():
    # TD3's actor loss is NaN on the steps between its delayed updates
    outputs = [StepOutput(step=i + 1, batch_size=4, per_sample={},
                          stats={"critic_loss": critic, "actor_loss": actor, "never": np.nan})
               for i, (critic, actor) in enumerate([(1.0, np.nan), (3.0, -2.0), (5.0, np.nan),
                                                    (7.0, -4.0)])]
    averaged = mean_stats(outputs)
    assert averaged["critic_loss"] == pytest.approx(4.0)
    assert averaged["actor_loss"] == pytest.approx(-3.0)
    assert np.isnan(averaged["never"])
    # a call none of whose steps computed the actor loss keeps the previous call's value
    skipped = mean_stats(outputs[:1], previous=averaged)
    assert skipped["critic_loss"] == pytest.approx(1.0)
    assert skipped["actor_loss"] == pytest.approx(-3.0)
    assert np.isnan(mean_stats(outputs[:1])["actor_loss"])


def test_keras3_optimizer_slots_are_built_inside_the_scope():
    import keras

    class KerasThreeRegressor(Regressor):
        def __init__(self):
            super().__init__(optimizer=keras.optimizers.Adam(0.01))

    class TfKerasAdamRegressor(Regressor):
        def __init__(self):
            super().__init__(optimizer=tf_keras.optimizers.Adam(0.01))

    data = _global_batches(3, 8)
    weights = []
    for trainee in (KerasThreeRegressor, TfKerasAdamRegressor):
        learner = MirroredLearner(trainee, strategy=_two_devices(), steps_per_call=3)
        dataset = tf.data.Dataset.from_tensor_slices(data).batch(8)
        assert len(learner.train(iter(learner.distribute_dataset(dataset)))) == 3
        weights.append(learner.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_bad_configuration_raises_named_errors():
    with pytest.raises(errors.InvalidConfigError, match="steps_per_call"):
        MirroredLearner(Regressor, strategy=_one_device(), steps_per_call=0)

    class NoOptimizer:
        trainable_variables = []

    with pytest.raises(errors.InvalidConfigError, match="optimizer"):
        MirroredLearner(NoOptimizer, strategy=_one_device())
    learner = MirroredLearner(Regressor, strategy=_one_device())
    dataset = tf.data.Dataset.from_tensor_slices(_global_batches(1, 4)).batch(4)
    with pytest.raises(errors.InvalidConfigError, match="iterator"):
        learner.train(learner.distribute_dataset(dataset))
