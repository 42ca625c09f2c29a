"""PGTFPolicy: returns-to-go postprocessing and the REINFORCE loss against hand computations."""
import numpy as np
import pytest

from tfrl.agents.pg import DEFAULT_CONFIG, PGTFPolicy
from tfrl.policy import SampleBatch

from .agent_helpers import (cartpole_spaces, categorical_entropy, categorical_logp,
                            loss_outputs, model_outputs, trainer_config)


@pytest.fixture
def pg_policy():
    obs_space, act_space = cartpole_spaces()
    return PGTFPolicy(obs_space, act_space, trainer_config(DEFAULT_CONFIG, gamma=0.9, seed=3))


def two_episode_batch():
    """Episode 7 (3 rows, terminated) then episode 8 (2 rows, cut by the fragment end)."""
    rng = np.random.default_rng(0)
    return SampleBatch({
        SampleBatch.OBS: rng.normal(size=(5, 4)).astype(np.float32),
        SampleBatch.NEXT_OBS: rng.normal(size=(5, 4)).astype(np.float32),
        SampleBatch.ACTIONS: np.array([0, 1, 1, 0, 1]),
        SampleBatch.REWARDS: np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32),
        SampleBatch.TERMINATEDS: np.array([False, False, True, False, False]),
        SampleBatch.TRUNCATEDS: np.zeros(5, bool),
        SampleBatch.EPS_ID: np.array([7, 7, 7, 8, 8]),
    })


def test_postprocess_adds_discounted_returns_per_episode_without_bootstrap(pg_policy):
    batch = pg_policy.postprocess_trajectory(two_episode_batch())
    expected = [1 + 0.9 * 2 + 0.81 * 3, 2 + 0.9 * 3, 3.0,  # episode 7 ends at row 2
                4 + 0.9 * 5, 5.0]                            # episode 8: no critic, no bootstrap
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], expected, rtol=1e-6)


def test_loss_is_negative_mean_of_logp_times_return(pg_policy):
    batch = pg_policy.postprocess_trajectory(two_episode_batch())
    loss, stats, _ = loss_outputs(pg_policy, batch)
    logits, _ = model_outputs(pg_policy, batch[SampleBatch.OBS])
    logp = categorical_logp(logits, batch[SampleBatch.ACTIONS])
    expected = -np.mean(logp * batch[SampleBatch.ADVANTAGES])
    assert loss == pytest.approx(expected, rel=1e-5)
    assert stats["policy_loss"] == pytest.approx(expected, rel=1e-5)
    assert stats["policy_entropy"] == pytest.approx(np.mean(categorical_entropy(logits)),
                                                    rel=1e-5)


def test_learn_steps_lower_the_loss_on_the_batch(pg_policy):
    batch = pg_policy.postprocess_trajectory(two_episode_batch())
    before, _, _ = loss_outputs(pg_policy, batch)
    for _ in range(3):
        pg_policy.learn_on_batch(batch)
    after, _, _ = loss_outputs(pg_policy, batch)
    # returns are all positive: a descent step must make the taken actions more likely overall
    assert after < before


def test_a_replaced_loss_learns_without_setting_pgs_stats():
    # rock_paper_scissors_multiagent.py's entropy loss: PGTFPolicy.with_updates(loss_fn=...)
    import tensorflow as tf

    def entropy_policy_gradient_loss(policy, model, dist_class, train_batch):
        logits, _ = model.from_batch(train_batch)
        action_dist = dist_class(logits, model)
        return (-0.1 * action_dist.entropy() - tf.reduce_mean(
            action_dist.logp(train_batch["actions"]) * train_batch["advantages"]))

    EntropyPolicy = PGTFPolicy.with_updates(loss_fn=entropy_policy_gradient_loss)
    obs_space, act_space = cartpole_spaces()
    policy = EntropyPolicy(obs_space, act_space, trainer_config(DEFAULT_CONFIG, seed=3))
    batch = policy.postprocess_trajectory(two_episode_batch())
    loss, _, _ = loss_outputs(policy, batch)
    logits, _ = model_outputs(policy, batch[SampleBatch.OBS])
    rows = -0.1 * categorical_entropy(logits) - np.mean(
        categorical_logp(logits, batch[SampleBatch.ACTIONS]) * batch[SampleBatch.ADVANTAGES])
    assert loss == pytest.approx(np.sum(rows), rel=1e-5)
    stats = policy.learn_on_batch(batch)
    assert "policy_loss" not in stats and "policy_entropy" not in stats
    assert stats["cur_lr"] == pytest.approx(DEFAULT_CONFIG["lr"])
    # its loss has a value per row (the entropy term is not reduced): minimised as their sum,
    # as classic RLlib's TF1 optimizers did
    assert np.isfinite(stats["total_loss"])
