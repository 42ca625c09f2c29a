"""The learn step inside tf.distribute.MirroredStrategy over two logical CPU devices.

tests/conftest.py splits the CPU into two logical devices, so this is a real 2-replica run.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from .policy_helpers import ActorCriticPolicy, cartpole_spaces, random_fragment
from tfrl.learner.mirrored_learner import mirrored_strategy

SGD_POLICY = ActorCriticPolicy.with_updates(
    name="SGDActorCritic",
    optimizer_fn=lambda policy, config: keras.optimizers.SGD(learning_rate=0.5))


def _batch(policy):
    return policy._prepare_batch(policy.postprocess_trajectory(random_fragment(n=8, seed=3)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("first_replica_rows", [4, 3])  # 3: an uneven split, 3 + 5 rows
def test_two_replica_step_equals_single_step_on_the_whole_batch(first_replica_rows):
    devices = tf.config.list_logical_devices("CPU")
    assert len(devices) >= 2, "tests/conftest.py should have split the CPU in two"
    strategy = mirrored_strategy([d.name for d in devices[:2]])
    obs_space, act_space = cartpole_spaces()
    single = SGD_POLICY(obs_space, act_space, {"seed": 0})
    with strategy.scope():
        mirrored = SGD_POLICY(obs_space, act_space, {"seed": 0})
    assert isinstance(mirrored.model.variables[0], tf.distribute.DistributedValues)
    assert mirrored.optimizer.variables  # slots exist before any traced step
    mirrored.set_weights(single.get_weights())
    before = single.get_weights()

    batch = _batch(single)
    single_stats, _ = single.compute_and_apply_gradients({k: tf.constant(v) for k, v in batch.items()})

    cut = first_replica_rows
    halves = [{k: v[:cut] for k, v in batch.items()}, {k: v[cut:] for k, v in batch.items()}]
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx: {k: tf.constant(v) for k, v in halves[ctx.replica_id_in_sync_group].items()})

    @tf.function
    def distributed_step(dist_batch):
        stats, per_sample = strategy.run(mirrored.compute_and_apply_gradients,
                                         args=(dist_batch,))
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                for k, v in stats.items()}

    stats = distributed_step(per_replica)
    # the replicas' weighted stats sum to the whole batch's (the gradient norm is per replica)
    for name in ("total_loss", "pi_loss", "vf_loss", "entropy"):
        np.testing.assert_allclose(float(stats[name]), float(single_stats[name]), rtol=1e-5)
    after_single = single.get_weights()
    after_mirrored = [v.numpy() for v in mirrored.model.variables]
    # the update really moved the weights, and both replicas' mean gradient was applied once
    assert max(np.abs(a - b).max() for a, b in zip(after_single, before)) > 1e-4
    for a, b in zip(after_single, after_mirrored):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # every replica holds the same values
    for v in mirrored.model.variables:
        values = [t.numpy() for t in v.values]
        np.testing.assert_array_equal(values[0], values[1])


@pytest.mark.timeout(120)
def test_loss_and_stats_runs_per_replica():
    devices = tf.config.list_logical_devices("CPU")
    strategy = mirrored_strategy([d.name for d in devices[:2]])
    obs_space, act_space = cartpole_spaces()
    with strategy.scope():
        policy = ActorCriticPolicy(obs_space, act_space, {"seed": 0})
    batch = _batch(policy)
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx: {k: tf.constant(v) for k, v in batch.items()})

    @tf.function
    def losses(dist_batch):
        loss, stats, _ = strategy.run(policy.loss_and_stats, args=(dist_batch,))
        return strategy.experimental_local_results(loss)

    replica_losses = [float(x) for x in losses(per_replica)]
    eager_loss, _, _ = policy.loss_and_stats({k: tf.constant(v) for k, v in batch.items()})
    assert len(replica_losses) == 2
    np.testing.assert_allclose(replica_losses, [float(eager_loss)] * 2, rtol=1e-5)
