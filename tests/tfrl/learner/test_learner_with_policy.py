"""MirroredLearner training a real tfrl policy (PGTFPolicy on CartPole spaces): built inside
`strategy.scope()`, trained through its own loss_and_stats / gradients / apply_gradients_op,
with 2 replicas reaching the same weights as 1 replica on the same global batches."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.learner import MirroredLearner, mirrored_strategy

pytestmark = pytest.mark.timeout(240)

CONFIG = {"model": {"fcnet_hiddens": [8]}, "lr": 0.01}


def _make_policy():
    env = gym.make("CartPole-v1")
    try:
        return PGTFPolicy(env.observation_space, env.action_space, dict(CONFIG))
    finally:
        env.close()


def _batches(policy, num_rows):
    rng = np.random.default_rng(3)
    columns = {}
    for name, spec in policy.loss_input_signature.items():
        shape = (num_rows,) + tuple(spec.shape[1:])
        if spec.dtype.is_floating:
            columns[name] = rng.normal(size=shape).astype(spec.dtype.as_numpy_dtype)
        else:
            columns[name] = rng.integers(0, 2, size=shape).astype(spec.dtype.as_numpy_dtype)
    return columns


def test_policy_learner_two_replicas_match_one_replica():
    initial = None
    results = []
    for devices in (["/cpu:0", "/cpu:1"], ["/cpu:0"]):
        strategy = mirrored_strategy(devices)
        learner = MirroredLearner(_make_policy, strategy=strategy, steps_per_call=2)
        if initial is None:
            initial = learner.trainee.get_weights()
            data = _batches(learner.trainee, 5 * 16)
        else:
            learner.trainee.set_weights(initial)
        dataset = tf.data.Dataset.from_tensor_slices(data).batch(16)
        iterator = iter(learner.distribute_dataset(dataset))
        outputs = []
        while True:
            step_outputs = learner.train(iterator)
            if not step_outputs:
                break
            outputs.extend(step_outputs)
        assert len(outputs) == 5
        assert {"loss", "policy_loss", "policy_entropy"} <= set(outputs[0].stats)
        results.append((learner.trainee.get_weights(), [o.stats["policy_loss"] for o in outputs]))
    (weights_2, losses_2), (weights_1, losses_1) = results
    np.testing.assert_allclose(losses_2, losses_1, rtol=1e-4, atol=1e-6)
    for a, b in zip(weights_2, weights_1):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert any(not np.allclose(a, s) for a, s in zip(weights_2, initial))
