"""A3CTFPolicy (A2C/A3C): the actor-critic loss, gradient clipping and the entropy schedule."""
import numpy as np
import pytest

from tfrl.agents.a3c import A2C_DEFAULT_CONFIG, DEFAULT_CONFIG, A3CTFPolicy
from tfrl.policy import SampleBatch

from .agent_helpers import (cartpole_spaces, categorical_entropy, categorical_logp,
                            loss_outputs, model_outputs, trainer_config)


def make_a3c(**overrides):
    obs_space, act_space = cartpole_spaces()
    return A3CTFPolicy(obs_space, act_space, trainer_config(DEFAULT_CONFIG, seed=5, **overrides))


def fragment(policy, n=6, terminated=True):
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    actions, _, extras = policy.compute_actions(obs)
    terminateds = np.zeros(n, bool)
    terminateds[-1] = terminated
    return SampleBatch({
        SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions,
        SampleBatch.NEXT_OBS: rng.normal(size=(n, 4)).astype(np.float32),
        SampleBatch.REWARDS: rng.uniform(0, 2, n).astype(np.float32),
        SampleBatch.TERMINATEDS: terminateds, SampleBatch.TRUNCATEDS: np.zeros(n, bool),
        SampleBatch.EPS_ID: np.zeros(n, np.int64), **extras})


def test_gae_postprocessing_matches_hand_computation():
    policy = make_a3c(gamma=0.9, **{"lambda": 0.5})
    raw = fragment(policy, n=3, terminated=True)
    batch = policy.postprocess_trajectory(raw)
    v, r = raw[SampleBatch.VF_PREDS].astype(np.float64), raw[SampleBatch.REWARDS]
    deltas = r + 0.9 * np.append(v[1:], 0.0) - v  # terminated: no bootstrap after the last row
    adv = [deltas[0] + 0.45 * deltas[1] + 0.45 ** 2 * deltas[2], deltas[1] + 0.45 * deltas[2],
           deltas[2]]
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS], np.array(adv) + v, rtol=1e-5,
                               atol=1e-6)


def test_actor_critic_loss_matches_hand_computation():
    policy = make_a3c(vf_loss_coeff=0.7, entropy_coeff=0.3)
    batch = policy.postprocess_trajectory(fragment(policy))
    loss, stats, _ = loss_outputs(policy, batch)
    logits, values = model_outputs(policy, batch[SampleBatch.OBS])
    logp = categorical_logp(logits, batch[SampleBatch.ACTIONS])
    policy_loss = -np.mean(logp * batch[SampleBatch.ADVANTAGES])
    vf_loss = 0.5 * np.mean((values - batch[SampleBatch.VALUE_TARGETS]) ** 2)
    entropy = np.mean(categorical_entropy(logits))
    assert stats["policy_loss"] == pytest.approx(policy_loss, rel=1e-5)
    assert stats["vf_loss"] == pytest.approx(vf_loss, rel=1e-5)
    assert stats["policy_entropy"] == pytest.approx(entropy, rel=1e-5)
    assert loss == pytest.approx(policy_loss + 0.7 * vf_loss - 0.3 * entropy, rel=1e-5)


def test_gradients_are_clipped_to_grad_clip():
    policy = make_a3c(grad_clip=1e-3)
    stats = policy.learn_on_batch(policy.postprocess_trajectory(fragment(policy)))
    assert stats["grad_gnorm"] == pytest.approx(1e-3, rel=1e-3)
    unclipped = make_a3c(grad_clip=None)
    stats = unclipped.learn_on_batch(unclipped.postprocess_trajectory(fragment(unclipped)))
    assert stats["grad_gnorm"] > 1e-2


def test_entropy_coefficient_and_learning_rate_follow_their_schedules():
    policy = make_a3c(entropy_coeff_schedule=[[0, 0.5], [100, 0.0]],
                      lr_schedule=[[0, 1e-2], [100, 1e-3]])
    batch = policy.postprocess_trajectory(fragment(policy))
    policy.on_global_var_update({"timestep": 50})
    _, stats, _ = loss_outputs(policy, batch)
    assert stats["entropy_coeff"] == pytest.approx(0.25)
    assert stats["cur_lr"] == pytest.approx(5.5e-3, rel=1e-5)


def test_a2c_config_is_the_a3c_config_with_one_synchronous_pass():
    assert A2C_DEFAULT_CONFIG["num_sgd_iter"] == 1
    assert A2C_DEFAULT_CONFIG["sgd_minibatch_size"] is None
    assert "grads_per_step" not in A2C_DEFAULT_CONFIG
    for key in ("vf_loss_coeff", "entropy_coeff", "grad_clip", "lambda", "use_gae"):
        assert A2C_DEFAULT_CONFIG[key] == DEFAULT_CONFIG[key]
