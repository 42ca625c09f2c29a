"""A rollout worker drawing its actions with the policy's numpy copy (`numpy_actions`): the rows
carry the TensorFlow policy's outputs for exactly the actions drawn, the draws follow the
policy's distribution and its latest weights, and policies without a numpy copy keep acting
with TensorFlow."""
import numpy as np
import pytest
from rollout_test_policies import PGPolicy

from tfrl.agents.dqn import DQNTFPolicy
from tfrl.rollout import RolloutWorker

pytestmark = pytest.mark.timeout(120)


def _softmax(logits):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("batch_mode", ["truncate_episodes", "complete_episodes"])
def test_rows_hold_the_tensorflow_policys_outputs_for_the_actions_drawn_in_numpy(batch_mode):
    worker = RolloutWorker("CartPole-v1", PGPolicy,
                           {"num_envs_per_worker": 3, "rollout_fragment_length": 20,
                            "batch_mode": batch_mode, "seed": 5})
    assert worker.runner.uses_numpy_actions
    policy = worker.get_policy()
    # the rows' outputs come from the numpy copy too: no TensorFlow call per fragment
    tensorflow_calls = []
    policy.compute_outputs_of_actions = lambda *a, **k: tensorflow_calls.append(a)
    for _ in range(3):  # complete_episodes carries running episodes' rows between samples
        batch = worker.sample()
        assert tensorflow_calls == []
        obs, actions = batch["obs"], batch["actions"]
        assert actions.dtype == np.int64 and set(np.unique(actions)) <= {0, 1}
        np.testing.assert_allclose(batch["action_logp"],
                                   policy.compute_log_likelihoods(actions, obs), atol=1e-5)
        np.testing.assert_allclose(batch["vf_preds"], policy.compute_values(obs), atol=1e-5)
        _, _, extra = policy.compute_actions(obs, explore=False)
        np.testing.assert_allclose(batch["action_dist_inputs"], extra["action_dist_inputs"],
                                   atol=1e-5)
        # advantages were computed from those values (postprocessing ran after they were added)
        assert np.isfinite(batch["advantages"]).all()
        assert np.abs(batch["value_targets"] - batch["vf_preds"] - batch["advantages"]).max() < 1e-4


def test_a_fragment_too_large_for_numpy_takes_its_outputs_from_one_tensorflow_call():
    # 4 envs x 20 steps of a 256x256 policy: 80 rows of 134k multiply-adds, past the numpy budget
    worker = RolloutWorker("CartPole-v1", PGPolicy,
                           {"num_envs_per_worker": 4, "rollout_fragment_length": 20, "seed": 3,
                            "model": {"fcnet_hiddens": [256, 256]}})
    assert worker.runner.uses_numpy_actions
    policy = worker.get_policy()
    calls, original = [], policy.compute_outputs_of_actions
    policy.compute_outputs_of_actions = \
        lambda obs, actions, **kwargs: calls.append(len(actions)) or original(obs, actions, **kwargs)
    batch = worker.sample()
    assert calls == [80]
    np.testing.assert_allclose(batch["action_logp"],
                               policy.compute_log_likelihoods(batch["actions"], batch["obs"]),
                               atol=1e-5)


def test_draws_follow_the_policys_probabilities_and_its_latest_weights():
    worker = RolloutWorker("CartPole-v1", PGPolicy,
                           {"num_envs_per_worker": 8, "rollout_fragment_length": 50, "seed": 1})
    policy = worker.get_policy()
    actor = worker.runner._actor
    obs = worker.sample()["obs"][:64]
    probs = _softmax(policy.compute_actions(obs, explore=False)[2]["action_dist_inputs"])
    draws = np.stack([actor.act_batch(obs) for _ in range(2000)])  # [2000, 64]
    frequencies = (draws == 1).mean(axis=0)
    # 2000 draws: the standard error of a frequency is at most 0.011
    np.testing.assert_allclose(frequencies, probs[:, 1], atol=0.05)
    np.testing.assert_array_equal(actor.act_batch(obs, explore=False), probs.argmax(axis=1))

    # new weights that make action 0 certain (as a training step would change them): the next
    # sample acts with them
    out = policy.model.base_model.get_layer("fc_out")
    kernel, _ = out.get_weights()
    out.set_weights([np.zeros_like(kernel), np.array([30.0, -30.0], np.float32)])
    assert (worker.sample()["actions"] == 0).all()


def test_gaussian_actions_are_drawn_in_numpy_with_their_likelihoods():
    worker = RolloutWorker("Pendulum-v1", PGPolicy,
                           {"num_envs_per_worker": 2, "rollout_fragment_length": 30, "seed": 2})
    assert worker.runner.uses_numpy_actions
    policy = worker.get_policy()
    batch = worker.sample()
    assert batch["actions"].shape == (60, 1) and batch["actions"].dtype == np.float32
    assert len(np.unique(batch["actions"])) == 60  # drawn, not the mean
    np.testing.assert_allclose(batch["action_logp"],
                               policy.compute_log_likelihoods(batch["actions"], batch["obs"]),
                               atol=1e-4)


def test_numpy_actions_off_or_unsupported_act_with_tensorflow():
    off = RolloutWorker("CartPole-v1", PGPolicy, {"rollout_fragment_length": 10,
                                                  "numpy_actions": False})
    assert not off.runner.uses_numpy_actions
    assert off.sample().count == 10
    # DQN draws epsilon-greedy actions with its own sampler: no numpy copy
    dqn = RolloutWorker("CartPole-v1", DQNTFPolicy, {"rollout_fragment_length": 10})
    assert not dqn.runner.uses_numpy_actions
    assert dqn.sample().count == 10
