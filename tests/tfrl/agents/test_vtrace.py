"""V-trace (tfrl/agents/impala/vtrace.py) against hand-computed numbers and against a direct
numpy evaluation of the paper's sum (Espeholt et al. 2018, eq. 1), episode boundaries included."""
import numpy as np
import pytest

from tfrl.agents.impala.vtrace import vtrace_returns


def reference_vtrace(log_rhos, discounts, rewards, values, next_values, continues,
                     rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0):
    """The paper's definition evaluated term by term (no recursion), one column at a time:
    v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t, the sum stopping at the
    first step whose episode ends (or at the fragment's end)."""
    rhos = np.exp(log_rhos)
    clipped = np.minimum(rho_bar, rhos)
    cs = np.minimum(c_bar, rhos)
    steps, batch = rewards.shape
    vs = np.zeros_like(values)
    for b in range(batch):
        for s in range(steps):
            total, weight = 0.0, 1.0
            for t in range(s, steps):
                delta = clipped[t, b] * (rewards[t, b] + discounts[t, b] * next_values[t, b]
                                         - values[t, b])
                total += weight * delta
                if not continues[t, b]:
                    break
                weight *= discounts[t, b] * cs[t, b]
            vs[s, b] = values[s, b] + total
    vs_next = np.where(continues > 0, np.concatenate([vs[1:], vs[-1:]]), next_values)
    pg = np.minimum(pg_rho_bar, rhos) * (rewards + discounts * vs_next - values)
    return vs, pg


def column(*xs):
    return np.array(xs, np.float32)[:, None]


def test_hand_computed_three_steps_with_clipped_importance_weights():
    # rho = [2, 0.5, 1] -> clipped rho = c = [1, 0.5, 1]; gamma 0.9; one fragment, no boundary
    # delta = [1*(1 + .9*1 - .5), .5*(2 + .9*1.5 - 1), 1*(3 + .9*2 - 1.5)] = [1.4, 1.175, 3.3]
    # v - V = [1.4 + .9*1*2.66, 1.175 + .9*.5*3.3, 3.3] = [3.794, 2.66, 3.3]
    out = vtrace_returns(
        log_rhos=np.log(column(2.0, 0.5, 1.0)), discounts=column(0.9, 0.9, 0.9),
        rewards=column(1.0, 2.0, 3.0), values=column(0.5, 1.0, 1.5),
        next_values=column(1.0, 1.5, 2.0), continues=column(1.0, 1.0, 0.0))
    np.testing.assert_allclose(out.vs.numpy()[:, 0], [4.294, 3.66, 4.8], rtol=1e-5)
    # pg advantage: rho_pg (r + gamma v_{s+1} - V), v_3 is the bootstrap V(x'_2) = 2
    np.testing.assert_allclose(out.pg_advantages.numpy()[:, 0],
                               [1 * (1 + .9 * 3.66 - .5), .5 * (2 + .9 * 4.8 - 1),
                                1 * (3 + .9 * 2.0 - 1.5)], rtol=1e-5)


def test_hand_computed_terminated_episode_cuts_the_trace_and_bootstraps_zero():
    # the episode terminates at step 1 (discount 0, next value 7 must not count); step 2 starts
    # a new episode, whose values must not leak into step 0 or 1.
    out = vtrace_returns(
        log_rhos=np.log(column(2.0, 0.5, 1.0)), discounts=column(0.9, 0.0, 0.9),
        rewards=column(1.0, 2.0, 3.0), values=column(0.5, 1.0, 1.5),
        next_values=column(1.0, 7.0, 2.0), continues=column(1.0, 0.0, 0.0))
    # delta = [1.4, .5*(2 - 1), 3.3]; v - V = [1.4 + .9*.5, .5, 3.3]
    np.testing.assert_allclose(out.vs.numpy()[:, 0], [2.35, 1.5, 4.8], rtol=1e-5)
    np.testing.assert_allclose(out.pg_advantages.numpy()[:, 0],
                               [1 + .9 * 1.5 - .5, .5 * (2 - 1), 3 + .9 * 2 - 1.5], rtol=1e-5)


def test_hand_computed_truncated_episode_bootstraps_from_its_last_observation():
    out = vtrace_returns(
        log_rhos=np.log(column(2.0, 0.5, 1.0)), discounts=column(0.9, 0.9, 0.9),
        rewards=column(1.0, 2.0, 3.0), values=column(0.5, 1.0, 1.5),
        next_values=column(1.0, 7.0, 2.0), continues=column(1.0, 0.0, 0.0))
    # delta_1 = .5*(2 + .9*7 - 1) = 3.65; v - V = [1.4 + .9*3.65, 3.65, 3.3]
    np.testing.assert_allclose(out.vs.numpy()[:, 0], [5.185, 4.65, 4.8], rtol=1e-5)


@pytest.mark.parametrize("thresholds", [(1.0, 1.0, 1.0), (2.0, 0.8, 1.5)])
def test_matches_the_papers_sum_on_random_fragments_with_boundaries(thresholds):
    rng = np.random.default_rng(0)
    steps, batch = 7, 5
    log_rhos = rng.normal(0, 0.8, (steps, batch)).astype(np.float32)
    ended = rng.random((steps, batch)) < 0.25
    terminated = ended & (rng.random((steps, batch)) < 0.5)
    continues = (~ended).astype(np.float32)
    continues[-1] = 0.0
    discounts = (0.95 * ~terminated).astype(np.float32)
    rewards = rng.normal(size=(steps, batch)).astype(np.float32)
    values = rng.normal(size=(steps, batch)).astype(np.float32)
    # within an episode the next observation is the next step's observation
    next_values = np.where(continues > 0, np.concatenate([values[1:], values[-1:]]),
                           rng.normal(size=(steps, batch))).astype(np.float32)
    rho_bar, c_bar, pg_bar = thresholds
    out = vtrace_returns(log_rhos, discounts, rewards, values, next_values, continues,
                         rho_bar, c_bar, pg_bar)
    vs, pg = reference_vtrace(log_rhos, discounts, rewards, values, next_values, continues,
                              rho_bar, c_bar, pg_bar)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.pg_advantages.numpy(), pg, rtol=1e-4, atol=1e-5)


def test_on_policy_targets_are_the_n_step_bootstrapped_returns():
    rewards = column(1.0, 1.0, 1.0, 1.0)
    values = column(0.3, -0.2, 0.7, 0.1)
    out = vtrace_returns(np.zeros_like(rewards), np.full_like(rewards, 0.5), rewards, values,
                         column(-0.2, 0.7, 0.1, 4.0), column(1.0, 1.0, 1.0, 0.0))
    expected = [1 + .5 + .25 + .125 + .0625 * 4, 1 + .5 + .25 + .125 * 4, 1 + .5 + .25 * 4, 1 + .5 * 4]
    np.testing.assert_allclose(out.vs.numpy()[:, 0], expected, rtol=1e-5)
