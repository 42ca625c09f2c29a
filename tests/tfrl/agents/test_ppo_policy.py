"""PPOTFPolicy: clipped surrogate, value clipping, KL penalty and its update rule, against hand
computations; advantage standardization; the trainer's KL hook on a real local worker."""
import types

import numpy as np
import pytest

from tfrl.agents.ppo import DEFAULT_CONFIG, PPOTFPolicy
from tfrl.agents.ppo.ppo import update_kl
from tfrl.rollout.worker_set import WorkerSet
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.policy import SampleBatch

from .agent_helpers import (cartpole_spaces, categorical_entropy, categorical_kl,
                            categorical_logp, loss_outputs, model_outputs, trainer_config)


def make_ppo(**overrides):
    obs_space, act_space = cartpole_spaces()
    return PPOTFPolicy(obs_space, act_space, trainer_config(DEFAULT_CONFIG, seed=11, **overrides))


def controlled_batch(policy, ratios, advantages, value_shift=0.0, targets=None):
    """A learn batch whose old log-probs make exp(logp_new - logp_old) equal `ratios`, and
    whose old value predictions are the current ones minus `value_shift`."""
    n = len(ratios)
    rng = np.random.default_rng(2)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    actions = np.arange(n) % 2
    logits, values = model_outputs(policy, obs)
    logp_new = categorical_logp(logits, actions)
    return SampleBatch({
        SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions,
        SampleBatch.ACTION_LOGP: (logp_new - np.log(ratios)).astype(np.float32),
        # old distribution inputs: the current logits shifted, so KL(old || new) > 0
        SampleBatch.ACTION_DIST_INPUTS: (logits + rng.normal(size=logits.shape)).astype(
            np.float32),
        SampleBatch.ADVANTAGES: np.asarray(advantages, np.float32),
        SampleBatch.VF_PREDS: (values - value_shift).astype(np.float32),
        SampleBatch.VALUE_TARGETS: (values + 1.0 if targets is None else
                                    np.asarray(targets)).astype(np.float32),
    }), logits, values


def test_clipped_surrogate_matches_hand_computation():
    policy = make_ppo(clip_param=0.2, standardize_advantages=False)
    batch, _, _ = controlled_batch(policy, ratios=[2.0, 0.5, 1.1, 0.3],
                                   advantages=[1.0, -1.0, 1.0, 1.0])
    _, stats, _ = loss_outputs(policy, batch)
    # rows: min(2, 1.2)=1.2 (clipped), min(-0.5, -0.8)=-0.8 (clipped), 1.1 (inside the range),
    # min(0.3, 0.8)=0.3 (a pessimistic bound keeps the unclipped low ratio)
    assert stats["policy_loss"] == pytest.approx(-np.mean([1.2, -0.8, 1.1, 0.3]), rel=1e-4)


def test_value_clipping_takes_the_larger_of_clipped_and_unclipped_errors():
    policy = make_ppo(vf_clip_param=0.5)
    # V_old = V - 2: the clipped prediction is V_old + 0.5 = V - 1.5
    batch, _, values = controlled_batch(policy, ratios=[1.0, 1.0, 1.0], advantages=[1, 0, -1],
                                        value_shift=2.0)
    targets = values + np.array([1.0, -1.0, -3.0])
    batch[SampleBatch.VALUE_TARGETS] = targets.astype(np.float32)
    _, stats, _ = loss_outputs(policy, batch)
    unclipped = (values - targets) ** 2                   # [1, 1, 9]
    clipped = (values - 1.5 - targets) ** 2               # [6.25, 0.25, 2.25]
    np.testing.assert_allclose(np.maximum(unclipped, clipped), [6.25, 1, 9], rtol=1e-4)
    assert stats["vf_loss"] == pytest.approx(np.mean([6.25, 1.0, 9.0]), rel=1e-4)


def test_clip_range_follows_its_schedule():
    # Stable-Baselines3's `clip_range=lin_0.2` over 1000 steps
    policy = make_ppo(clip_param=0.2, clip_param_schedule=[[0, 0.2], [1000, 0.0]],
                      standardize_advantages=False)
    batch, _, _ = controlled_batch(policy, ratios=[2.0, 0.5], advantages=[1.0, -1.0])
    assert loss_outputs(policy, batch)[1]["policy_loss"] == pytest.approx(-np.mean([1.2, -0.8]),
                                                                         rel=1e-4)
    policy.on_global_var_update({"timestep": 500})  # clip 0.1
    _, stats, _ = loss_outputs(policy, batch)
    assert stats["clip_param"] == pytest.approx(0.1)
    assert stats["policy_loss"] == pytest.approx(-np.mean([1.1, -0.9]), rel=1e-4)


def test_value_clipping_off_with_none():
    policy = make_ppo(vf_clip_param=None)
    batch, _, values = controlled_batch(policy, ratios=[1.0, 1.0], advantages=[1, -1],
                                        value_shift=2.0)
    targets = values + np.array([1.0, -3.0])
    batch[SampleBatch.VALUE_TARGETS] = targets.astype(np.float32)
    assert loss_outputs(policy, batch)[1]["vf_loss"] == pytest.approx(np.mean([1.0, 9.0]), rel=1e-4)


def test_ill_formed_clip_schedule_is_refused():
    from tfrl.agents.ppo.ppo import validate_config
    from tfrl.errors import InvalidConfigError
    with pytest.raises(InvalidConfigError, match="clip_param_schedule"):
        validate_config(trainer_config(DEFAULT_CONFIG, clip_param_schedule=0.1))
    with pytest.raises(InvalidConfigError, match="vf_clip_param"):
        validate_config(trainer_config(DEFAULT_CONFIG, vf_clip_param=0.0))


def test_total_loss_combines_surrogate_kl_value_and_entropy_terms():
    policy = make_ppo(kl_coeff=0.3, vf_loss_coeff=0.7, entropy_coeff=0.05,
                      standardize_advantages=False)
    batch, logits, _ = controlled_batch(policy, ratios=[1.3, 0.9, 1.0, 1.05],
                                        advantages=[0.5, -2.0, 1.0, 0.1])
    loss, stats, _ = loss_outputs(policy, batch)
    kl = np.mean(categorical_kl(batch[SampleBatch.ACTION_DIST_INPUTS], logits))
    entropy = np.mean(categorical_entropy(logits))
    assert stats["kl"] == pytest.approx(kl, rel=1e-4)
    assert stats["entropy"] == pytest.approx(entropy, rel=1e-5)
    assert stats["cur_kl_coeff"] == pytest.approx(0.3)
    expected = stats["policy_loss"] + 0.3 * kl + 0.7 * stats["vf_loss"] - 0.05 * entropy
    assert loss == pytest.approx(expected, rel=1e-5)
    assert stats["total_loss"] == pytest.approx(loss)


def test_standardized_advantages_make_the_loss_invariant_to_affine_scaling():
    policy = make_ppo(standardize_advantages=True)
    advantages = np.array([0.5, -2.0, 1.0, 0.1])
    batch, _, _ = controlled_batch(policy, ratios=[1.3, 0.7, 1.0, 1.05], advantages=advantages)
    scaled, _, _ = controlled_batch(policy, ratios=[1.3, 0.7, 1.0, 1.05],
                                    advantages=3.0 * advantages + 5.0)
    assert loss_outputs(policy, batch)[1]["policy_loss"] == pytest.approx(
        loss_outputs(policy, scaled)[1]["policy_loss"], rel=1e-4)
    raw = make_ppo(standardize_advantages=False)
    assert loss_outputs(raw, batch)[1]["policy_loss"] != pytest.approx(
        loss_outputs(raw, scaled)[1]["policy_loss"], rel=1e-2)


@pytest.mark.parametrize("measured_kl, expected_coeff", [
    (0.05, 0.3),     # > 2 x target 0.01: grow by 1.5
    (0.001, 0.1),    # < target / 2: halve
    (0.012, 0.2),    # within [target / 2, 2 x target]: keep
])
def test_kl_coefficient_update_rule(measured_kl, expected_coeff):
    policy = make_ppo(kl_coeff=0.2, kl_target=0.01)
    assert policy.update_kl(measured_kl) == pytest.approx(expected_coeff)
    batch, _, _ = controlled_batch(policy, ratios=[1.0, 1.0], advantages=[1.0, -1.0])
    assert loss_outputs(policy, batch)[1]["cur_kl_coeff"] == pytest.approx(expected_coeff)


def test_trainer_hook_updates_the_learning_policy_from_learner_stats():
    config = trainer_config(DEFAULT_CONFIG, kl_coeff=0.2, kl_target=0.01, num_workers=0)
    workers = WorkerSet("CartPole-v1", PPOTFPolicy, config, num_workers=0)
    try:
        trainer = types.SimpleNamespace(workers=workers,
                                        optimizer=PolicyOptimizer(workers, config), config=config)
        update_kl(trainer, {"default_policy": {"kl": 0.5, "total_loss": 1.0}})
        policy = workers.local_worker().get_policy()
        assert float(policy.kl_coeff.numpy()) == pytest.approx(0.3)
        update_kl(trainer, {})  # no learner stats this step (e.g. nothing trained): no change
        assert float(policy.kl_coeff.numpy()) == pytest.approx(0.3)
    finally:
        workers.stop()


def test_learn_on_rollout_fragment_reports_every_stat():
    policy = make_ppo()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(8, 4)).astype(np.float32)
    actions, _, extras = policy.compute_actions(obs)
    batch = policy.postprocess_trajectory(SampleBatch({
        SampleBatch.OBS: obs, SampleBatch.ACTIONS: actions, SampleBatch.NEXT_OBS: obs,
        SampleBatch.REWARDS: np.ones(8, np.float32), SampleBatch.TERMINATEDS: np.zeros(8, bool),
        SampleBatch.TRUNCATEDS: np.zeros(8, bool), SampleBatch.EPS_ID: np.zeros(8, np.int64),
        **extras}))
    stats = policy.learn_on_batch(batch)
    for key in ("total_loss", "policy_loss", "vf_loss", "vf_explained_var", "kl", "entropy",
                "entropy_coeff", "cur_kl_coeff", "cur_lr"):
        assert np.isfinite(stats[key]), key
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)  # first step: old policy == new policy
