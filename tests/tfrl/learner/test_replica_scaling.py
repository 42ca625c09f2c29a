"""One replica-scaling rule for every gradient step, and the Learner contract.

The CPU is split into two logical devices (tests/conftest.py), so the 2-replica runs are real
MirroredStrategy runs. The policy learns with plain SGD: Adam's first step barely depends on the
gradient's scale, so it would hide a wrong weighting of the replicas.
"""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tfrl import errors
from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.learner import (DatasetLearner, KerasTrainee, Learner, MirroredLearner, as_trainee,
                          mirrored_strategy, replica_share)
from tfrl.learner.minibatch_sgd import MinibatchSGD

pytestmark = pytest.mark.timeout(240)

SGDPolicy = PGTFPolicy.with_updates(
    name="SGDPGPolicy", optimizer_fn=lambda policy, config: tf_keras.optimizers.SGD(learning_rate=0.5))
CONFIG = {"model": {"fcnet_hiddens": [8]}, "seed": 0, "lr": 0.5}
ROWS = 7  # two replicas get 4 + 3 rows: weighting them 1/2 each instead of 4/7 and 3/7 shows


def _two_devices():
    return mirrored_strategy(["/cpu:0", "/cpu:1"])


def _make_policy():
    env = gym.make("CartPole-v1")
    try:
        return SGDPolicy(env.observation_space, env.action_space, dict(CONFIG))
    finally:
        env.close()


def _batch(policy, rows=ROWS):
    """Random loss columns whose rows differ a lot, so the two replicas' gradients differ."""
    rng = np.random.default_rng(5)
    columns = {}
    for name, spec in policy.loss_input_signature.items():
        shape = (rows,) + tuple(spec.shape[1:])
        if spec.dtype.is_floating:
            columns[name] = (rng.normal(size=shape) * np.arange(1, rows + 1).reshape(
                (rows,) + (1,) * (len(shape) - 1))).astype(spec.dtype.as_numpy_dtype)
        else:
            columns[name] = rng.integers(0, 2, size=shape).astype(spec.dtype.as_numpy_dtype)
    return columns


def _assert_same_weights(got, want):
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_replica_share_is_the_local_fraction_of_the_global_batch():
    strategy = _two_devices()
    rows = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([4, 3][ctx.replica_id_in_sync_group]))

    @tf.function
    def shares(local_rows):
        share, global_rows = strategy.run(replica_share, args=(local_rows,))
        return (strategy.experimental_local_results(share),
                strategy.experimental_local_results(global_rows))

    share, global_rows = shares(rows)
    np.testing.assert_allclose([float(s) for s in share], [4 / 7, 3 / 7], rtol=1e-6)
    assert [int(g) for g in global_rows] == [7, 7]
    one_share, one_global = replica_share(tf.constant(5))
    assert one_share == 1.0 and isinstance(one_share, float) and int(one_global) == 5


def test_replica_share_in_a_cross_replica_context_is_a_named_error():
    with _two_devices().scope():
        with pytest.raises(errors.NotSupportedError, match="strategy.run"):
            replica_share(tf.constant(3))


def test_uneven_two_replica_step_equals_the_single_device_step_on_the_whole_batch():
    single = _make_policy()
    initial = single.get_weights()
    batch = _batch(single)
    expected = single.learn_on_batch(batch)  # the single-device path: TFPolicy is a Learner
    expected_weights = single.get_weights()
    assert max(np.abs(a - b).max() for a, b in zip(expected_weights, initial)) > 1e-3

    learner = MirroredLearner(_make_policy, strategy=_two_devices())
    learner.set_weights(initial)
    stats = learner.learn_on_batch(batch)
    _assert_same_weights(learner.get_weights(), expected_weights)
    for name in ("policy_loss", "cur_lr"):
        assert stats[name] == pytest.approx(expected[name], rel=1e-5)
    assert stats["loss"] == pytest.approx(expected["total_loss"], rel=1e-5)
    # every replica holds the same values
    for variable in learner.trainee.trainable_variables:
        np.testing.assert_array_equal(*[v.numpy() for v in variable.values])


def test_minibatch_sgd_on_one_device_takes_the_same_step():
    reference = _make_policy()
    initial = reference.get_weights()
    batch = _batch(reference)
    reference.learn_on_batch(batch)
    policy = _make_policy()
    policy.set_weights(initial)
    sgd = MinibatchSGD(policy, tf.distribute.get_strategy(), num_sgd_iter=1, minibatch_size=ROWS)
    stats = sgd.learn_on_batch(batch)
    assert np.isfinite(stats["policy_loss"])
    _assert_same_weights(sgd.get_weights(), reference.get_weights())


def test_minibatch_sgd_reports_a_missing_column():
    policy = _make_policy()
    sgd = MinibatchSGD(policy, tf.distribute.get_strategy(), num_sgd_iter=1, minibatch_size=4)
    batch = _batch(policy)
    missing = sorted(batch)[0]
    del batch[missing]
    with pytest.raises(errors.InvalidBatchError, match=missing):
        sgd.learn_on_batch(batch)


def test_every_learner_implements_the_protocol():
    policy = _make_policy()
    learner = MirroredLearner(_make_policy, strategy=_two_devices())
    sgd = MinibatchSGD(policy, tf.distribute.get_strategy(), num_sgd_iter=1, minibatch_size=4)
    for implementation in (policy, sgd, learner):
        assert isinstance(implementation, Learner)
    assert isinstance(learner, DatasetLearner) and not isinstance(sgd, DatasetLearner)
    assert as_trainee(policy) is policy

    class Plain:
        optimizer = tf_keras.optimizers.SGD(0.1)
        trainable_variables = []

        def loss_and_stats(self, batch):
            raise AssertionError("not called")

    assert isinstance(as_trainee(Plain()), KerasTrainee)
    with pytest.raises(errors.InvalidConfigError, match="loss_fn"):
        as_trainee(type("NoLoss", (), {"optimizer": None, "trainable_variables": []})())


def test_learn_on_batch_rejects_bad_batches_with_named_errors():
    learner = MirroredLearner(_make_policy, strategy=_two_devices())
    batch = _batch(learner.trainee)
    weights = learner.get_weights()
    with pytest.raises(errors.InvalidBatchError, match="1 rows for 2 replicas"):
        learner.learn_on_batch({k: v[:1] for k, v in batch.items()})
    uneven = dict(batch)
    first = sorted(uneven)[0]
    uneven[first] = uneven[first][:3]
    with pytest.raises(errors.InvalidBatchError, match="different lengths"):
        learner.learn_on_batch(uneven)
    with pytest.raises(errors.CheckpointError, match="set_weights"):
        learner.set_weights(weights[:-1])
    _assert_same_weights(learner.get_weights(), weights)  # nothing was learned or assigned


def test_minibatch_sgd_traced_ahead_learns_as_one_traced_at_its_first_batch():
    """`trace()` (run while the remote workers start) defines the function the first batch then
    runs: no second trace, and the same steps on two replicas as a learner that never traced."""
    strategy = _two_devices()
    reference = _make_policy()
    batch, initial = _batch(reference, rows=16), reference.get_weights()
    results = []
    for ahead in (True, False):
        with strategy.scope():
            policy = _make_policy()
        policy.set_weights(initial)
        sgd = MinibatchSGD(policy, strategy, num_sgd_iter=3, minibatch_size=8)
        if ahead:
            sgd.trace()
            assert sgd._run.experimental_get_tracing_count() == 1
        stats = sgd.learn_on_batch(batch)
        sgd.learn_on_batch(batch)
        assert sgd._run.experimental_get_tracing_count() == 1
        results.append((stats, sgd.get_weights()))
    (stats_ahead, weights_ahead), (stats_late, weights_late) = results
    assert stats_ahead.keys() == stats_late.keys()
    np.testing.assert_allclose([stats_ahead[k] for k in sorted(stats_ahead)],
                               [stats_late[k] for k in sorted(stats_late)], rtol=1e-5)
    _assert_same_weights(weights_ahead, weights_late)
