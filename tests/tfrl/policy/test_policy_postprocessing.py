"""Advantages (GAE and returns), gymnasium bootstrapping, n-step returns, schedules."""
import numpy as np
import pytest

from .policy_helpers import random_fragment
from tfrl.errors import InvalidBatchError, InvalidConfigError
from tfrl.policy import SampleBatch, adjust_nstep, compute_advantages, concat_samples
from tfrl.utils import LinearSchedule, PiecewiseSchedule


def test_gae_matches_hand_computation():
    batch = SampleBatch({SampleBatch.REWARDS: [1.0, 0.0, 2.0],
                         SampleBatch.VF_PREDS: [0.5, 1.0, -1.0]})
    gamma, lam, last_r = 0.9, 0.8, 3.0
    compute_advantages(batch, last_r, gamma, lam)
    d2 = 2.0 + 0.9 * 3.0 - (-1.0)          # 4.7
    d1 = 0.0 + 0.9 * (-1.0) - 1.0          # -1.9
    d0 = 1.0 + 0.9 * 1.0 - 0.5             # 1.4
    a2 = d2
    a1 = d1 + 0.72 * a2
    a0 = d0 + 0.72 * a1
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], [a0, a1, a2], rtol=1e-6)
    np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS],
                               np.array([a0, a1, a2]) + [0.5, 1.0, -1.0], rtol=1e-6)


def test_discounted_returns_without_gae():
    batch = SampleBatch({SampleBatch.REWARDS: [1.0, 1.0], SampleBatch.VF_PREDS: [0.2, 0.4]})
    compute_advantages(batch, 10.0, 0.5, use_gae=False, use_critic=True)
    returns = [1 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10]
    np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS], returns)
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], np.array(returns) - [0.2, 0.4],
                               rtol=1e-6)
    plain = SampleBatch({SampleBatch.REWARDS: [1.0, 1.0]})
    compute_advantages(plain, 0.0, 0.5, use_gae=False, use_critic=False)
    np.testing.assert_allclose(plain[SampleBatch.ADVANTAGES], [1.5, 1.0])
    with pytest.raises(InvalidBatchError, match="vf_preds"):
        compute_advantages(SampleBatch({SampleBatch.REWARDS: [1.0]}), 0.0)


def _last_advantage(policy, fragment):
    out = policy.postprocess_trajectory(fragment.copy())
    return float(out[SampleBatch.ADVANTAGES][-1])


def test_truncated_or_cut_bootstraps_from_last_next_obs_terminated_does_not(ac_policy):
    gamma = ac_policy.config["gamma"]
    cut = random_fragment(n=5)
    truncated = random_fragment(n=5, truncated_at_end=True)
    terminated = random_fragment(n=5, terminated_at_end=True)
    v_last = float(ac_policy.compute_values(cut[SampleBatch.NEXT_OBS][-1:])[0])
    r, v = 1.0, float(cut[SampleBatch.VF_PREDS][-1])
    assert _last_advantage(ac_policy, cut) == pytest.approx(r + gamma * v_last - v, rel=1e-5)
    assert _last_advantage(ac_policy, truncated) == pytest.approx(r + gamma * v_last - v,
                                                                  rel=1e-5)
    assert _last_advantage(ac_policy, terminated) == pytest.approx(r - v, rel=1e-5)
    assert v_last != 0.0


def test_episodes_inside_one_fragment_are_handled_separately(ac_policy):
    first = random_fragment(n=4, seed=1, terminated_at_end=True)
    second = random_fragment(n=3, seed=2)
    second[SampleBatch.EPS_ID] = np.ones(3, np.int64)
    together = ac_policy.postprocess_trajectory(concat_samples([first, second]))
    apart = concat_samples([ac_policy.postprocess_trajectory(first.copy()),
                            ac_policy.postprocess_trajectory(second.copy())])
    np.testing.assert_allclose(together[SampleBatch.ADVANTAGES],
                               apart[SampleBatch.ADVANTAGES], rtol=1e-6)


def test_adjust_nstep_matches_hand_computation():
    batch = SampleBatch({
        SampleBatch.OBS: np.arange(5), SampleBatch.NEXT_OBS: np.arange(1, 6),
        SampleBatch.ACTIONS: np.zeros(5, int),
        SampleBatch.REWARDS: [1.0, 2.0, 3.0, 4.0, 5.0],
        SampleBatch.TERMINATEDS: [False, False, True, False, False],
        SampleBatch.TRUNCATEDS: [False] * 5,
        SampleBatch.EPS_ID: [0, 0, 0, 1, 1]})
    adjust_nstep(3, 0.5, batch)
    np.testing.assert_allclose(batch[SampleBatch.REWARDS],
                               [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3, 4 + 0.5 * 5, 5])
    np.testing.assert_array_equal(batch[SampleBatch.NEXT_OBS], [3, 3, 3, 5, 5])
    np.testing.assert_array_equal(batch[SampleBatch.TERMINATEDS],
                                  [True, True, True, False, False])
    np.testing.assert_array_equal(batch[SampleBatch.N_STEPS], [3, 2, 1, 2, 1])
    np.testing.assert_array_equal(batch[SampleBatch.OBS], np.arange(5))
    with pytest.raises(InvalidBatchError):
        adjust_nstep(0, 0.5, batch)


def test_schedules():
    s = PiecewiseSchedule([[0, 1.0], [10, 0.0], [20, 0.5]])
    assert [s(t) for t in (-5, 0, 5, 10, 15, 30)] == [1.0, 1.0, 0.5, 0.0, 0.25, 0.5]
    assert PiecewiseSchedule([[0, 1.0], [10, 0.0]], outside_value=7.0)(11) == 7.0
    lin = LinearSchedule(100, final_p=0.1, initial_p=1.0)
    assert lin(50) == pytest.approx(0.55) and lin(1000) == pytest.approx(0.1)
    with pytest.raises(InvalidConfigError):
        PiecewiseSchedule([])
    with pytest.raises(InvalidConfigError):
        LinearSchedule(0, 0.1)


def test_gae_postprocessing_names_the_advantage_keys_a_policy_config_lacks():
    from .policy_helpers import ActorCriticPolicy, cartpole_spaces

    NoGae = ActorCriticPolicy.with_updates(
        name="NoGae", get_default_config=lambda: {"lambda": 0.95, "entropy_coeff": 0.0,
                                                  "model": {"fcnet_hiddens": [8]}})
    # the policy's first postprocessing pass, at construction, finds it
    with pytest.raises(InvalidConfigError, match=r"\['use_gae', 'use_critic'\]"):
        NoGae(*cartpole_spaces(), {})
    NoLambda = ActorCriticPolicy.with_updates(
        name="NoLambda", get_default_config=lambda: {"use_gae": True, "use_critic": True,
                                                     "entropy_coeff": 0.0,
                                                     "model": {"fcnet_hiddens": [8]}})
    with pytest.raises(InvalidConfigError, match=r"\['lambda'\]"):
        NoLambda(*cartpole_spaces(), {})
