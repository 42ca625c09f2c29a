"""Doubly robust and direct-method estimation, and per-pass WIS, on small recorded data: a
hand-built batch whose cross-fitted Q models are computed by hand, hand-built episodes of
different lengths whose per-decision WIS values are computed by hand, a rollout worker reading
recorded CartPole files with `input_evaluation`, and the refusal of unknown estimator names.
"""
import numpy as np
import pytest

from tfrl import errors
from tfrl.agents.pg import PGTFPolicy
from tfrl.offline.off_policy_estimator import (
    DirectMethod, DoublyRobust, WeightedImportanceSampling)
from tfrl.policy.sample_batch import SampleBatch, concat_samples
from tfrl.rollout import RolloutWorker

LINEAR = {"fcnet_hiddens": []}
TARGET_PUSH_RIGHT = 0.65
LEFT, RIGHT = 0, 1
STATE_A, STATE_B = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]


def constant_policy_weights(policy, p_right):
    """Weights of a linear policy whose action probabilities ignore the observation."""
    kernel, bias, *value = policy.get_weights()
    bias = np.array([0.0, np.log(p_right / (1.0 - p_right))], bias.dtype)
    return [np.zeros_like(kernel), bias, *value]


def target_worker(**offline):
    worker = RolloutWorker("CartPole-v1", PGTFPolicy, config={
        "model": LINEAR, "gamma": 1.0, "seed": 3, "batch_mode": "complete_episodes",
        "rollout_fragment_length": 100, **offline})
    worker.get_policy().set_weights(
        constant_policy_weights(worker.get_policy(), TARGET_PUSH_RIGHT))
    return worker


def two_step_episode(eps_id, first_action, first_reward, second_action, second_reward):
    """State A, then state B, then the end; recorded with a uniformly random behaviour."""
    return SampleBatch({
        SampleBatch.OBS: np.array([STATE_A, STATE_B], np.float32),
        SampleBatch.ACTIONS: np.array([first_action, second_action]),
        SampleBatch.REWARDS: np.array([first_reward, second_reward], np.float32),
        SampleBatch.TERMINATEDS: np.array([False, True]),
        SampleBatch.EPS_ID: np.array([eps_id, eps_id]),
        SampleBatch.T: np.array([0, 1]),
        SampleBatch.ACTION_PROB: np.array([0.5, 0.5], np.float32)})


@pytest.mark.timeout(120)
def test_doubly_robust_and_direct_method_match_hand_computed_cross_fitted_values():
    worker = target_worker()
    try:
        policy = worker.get_policy()
        batch = concat_samples([
            two_step_episode(0, RIGHT, 2.0, RIGHT, 4.0),
            two_step_episode(1, RIGHT, 2.0, RIGHT, 6.0),
            two_step_episode(2, LEFT, 1.0, LEFT, 3.0),
            two_step_episode(3, LEFT, 1.0, LEFT, 3.0)])
        dr, dm = DoublyRobust(policy, 1.0), DirectMethod(policy, 1.0)
        for estimator in (dr, dm):
            estimator.process(batch)
        dr_estimates, dm_estimates = dr.get_metrics(), dm.get_metrics()
        assert dr.get_metrics() == []  # the pass ended with the first call
    finally:
        worker.stop()
    # Episodes 0 and 2 are estimated with the model fitted on episodes 1 and 3, and back.
    # Fitted on 1 and 3: Q(B,R) = 6, Q(B,L) = 3, V(B) = .65*6 + .35*3 = 4.95,
    #   Q(A,R) = 2 + 4.95 = 6.95, Q(A,L) = 1 + 4.95 = 5.95, V(A) = .65*6.95 + .35*5.95 = 6.60.
    # Fitted on 0 and 2: Q(B,R) = 4, Q(B,L) = 3, V(B) = 3.65, Q(A,R) = 5.65, Q(A,L) = 4.65,
    #   V(A) = 5.30. Step ratios: right .65/.5 = 1.3, left .35/.5 = 0.7.
    # DR, backwards: episode 0: 4.95 + 1.3 (4 - 6) = 2.35; 6.60 + 1.3 (2 + 2.35 - 6.95) = 3.22
    #   episode 1: 3.65 + 1.3 (6 - 4) = 6.25; 5.30 + 1.3 (2 + 6.25 - 5.65) = 8.68
    #   episode 2: 4.95 + 0.7 (3 - 3) = 4.95; 6.60 + 0.7 (1 + 4.95 - 5.95) = 6.60
    #   episode 3: 3.65; 5.30 + 0.7 (1 + 3.65 - 4.65) = 5.30
    dr_values = [e.metrics["V_step_DR"] for e in dr_estimates]
    assert dr_values == pytest.approx([3.22, 8.68, 6.60, 5.30], rel=2e-3)
    # the mean is the true value of this data's average reward model: B,R pays 5 on average
    assert np.mean(dr_values) == pytest.approx(0.65 * (2 + 4.3) + 0.35 * (1 + 4.3), rel=2e-3)
    assert [e.metrics["V_prev"] for e in dr_estimates] == pytest.approx([6.0, 8.0, 4.0, 4.0])
    assert [e.metrics["V_gain_est"] for e in dr_estimates] == pytest.approx(
        [3.22 / 6, 8.68 / 8, 6.60 / 4, 5.30 / 4], rel=2e-3)
    assert [e.metrics["V_step_DM"] for e in dm_estimates] == pytest.approx(
        [6.60, 5.30, 6.60, 5.30], rel=2e-3)
    assert {e.estimator_name for e in dr_estimates} == {"dr"}


def uniform_episode(eps_id, actions, rewards):
    """An episode of len(actions) steps recorded with a uniformly random behaviour (the
    observations do not matter to the constant target policy)."""
    length = len(actions)
    return SampleBatch({
        SampleBatch.OBS: np.tile(np.array([STATE_A], np.float32), (length, 1)),
        SampleBatch.ACTIONS: np.array(actions),
        SampleBatch.REWARDS: np.array(rewards, np.float32),
        SampleBatch.TERMINATEDS: np.arange(length) == length - 1,
        SampleBatch.EPS_ID: np.full(length, eps_id),
        SampleBatch.T: np.arange(length),
        SampleBatch.ACTION_PROB: np.full(length, 0.5, np.float32)})


@pytest.mark.timeout(120)
def test_wis_matches_hand_computed_per_decision_values_on_episodes_of_different_lengths():
    worker = target_worker()
    try:
        policy = worker.get_policy()
        wis, wis_discounted = (WeightedImportanceSampling(policy, 1.0),
                               WeightedImportanceSampling(policy, 0.5))
        batch = concat_samples([
            uniform_episode(0, [RIGHT, RIGHT, RIGHT], [1.0, 2.0, 3.0]),
            uniform_episode(1, [LEFT], [4.0]),
            uniform_episode(2, [RIGHT, LEFT], [2.0, 1.0])])
        ones = concat_samples([
            uniform_episode(0, [RIGHT, RIGHT, RIGHT], [1.0, 1.0, 1.0]),
            uniform_episode(1, [LEFT], [1.0]),
            uniform_episode(2, [RIGHT, LEFT], [1.0, 1.0])])
        wis.process(batch)
        wis_discounted.process(ones)
        values = [e.metrics["V_step_WIS"] for e in wis.get_metrics()]
        discounted = [e.metrics["V_step_WIS"] for e in wis_discounted.get_metrics()]
    finally:
        worker.stop()
    # Step ratios: right .65/.5 = 1.3, left .35/.5 = 0.7. Cumulative ratios p_t:
    #   episode 0: 1.3, 1.69, 2.197; episode 1: 0.7; episode 2: 1.3, 0.91.
    # Normaliser of step t, the mean p_t over the 3 episodes, an ended episode counting with
    # its final ratio: t=0: (1.3 + 0.7 + 1.3) / 3 = 1.1; t=1: (1.69 + 0.7 + 0.91) / 3 = 1.1;
    #   t=2: (2.197 + 0.7 + 0.91) / 3 = 1.269.
    assert values == pytest.approx([
        1.3 / 1.1 * 1 + 1.69 / 1.1 * 2 + 2.197 / 1.269 * 3,  # 9.4484
        0.7 / 1.1 * 4,  # 2.5455
        1.3 / 1.1 * 2 + 0.91 / 1.1 * 1], rel=1e-6)  # 3.1909; float32 target likelihoods
    # their mean is the per-step form sum_t (sum_i p_t r_t) / (sum_i p_t)
    assert np.mean(values) == pytest.approx(
        6.7 / 3.3 + 4.29 / 3.3 + 6.591 / 3.807, rel=1e-6)  # 5.0616
    # With reward 1 at every step (gamma 0.5): sum_t 0.5^t (sum of p_t over the episodes still
    # running at t) / (sum of p_t over all episodes) = 1 + 0.5 * 2.6 / 3.3 + 0.25 * 2.197 / 3.807.
    # A normaliser over only the episodes that reach t would give exactly the recorded
    # discounted return here, (1.75 + 1 + 1.5) / 3, whatever the target policy.
    assert np.mean(discounted) == pytest.approx(
        1 + 0.5 * 2.6 / 3.3 + 0.25 * 2.197 / 3.807, rel=1e-6)  # 1.5382
    assert np.mean(discounted) != pytest.approx((1.75 + 1 + 1.5) / 3, rel=1e-2)
    assert discounted == pytest.approx([
        1.3 / 1.1 + 0.5 * 1.69 / 1.1 + 0.25 * 2.197 / 1.269, 0.7 / 1.1,
        1.3 / 1.1 + 0.5 * 0.91 / 1.1], rel=1e-6)


def per_decision_wis(episodes, p_right):
    """Per-decision WIS normalised over all `episodes` (gamma 1), written out independently."""
    ratios = [np.cumprod(np.where(e[SampleBatch.ACTIONS] == RIGHT, p_right, 1 - p_right)
                         / e[SampleBatch.ACTION_PROB]) for e in episodes]
    longest = max(len(r) for r in ratios)
    # an episode that ended keeps its final ratio in the normaliser of later steps
    padded = np.array([np.concatenate([r, np.full(longest - len(r), r[-1])]) for r in ratios])
    normaliser = padded.mean(axis=0)
    return np.mean([np.sum(r / normaliser[:len(r)] * e[SampleBatch.REWARDS])
                    for r, e in zip(ratios, episodes)])


@pytest.mark.timeout(120)
def test_worker_reading_recorded_files_reports_pass_normalised_wis_and_dr(tmp_path):
    out = str(tmp_path / "uniform")
    recorder = target_worker(output=out)
    recorder.get_policy().set_weights(constant_policy_weights(recorder.get_policy(), 0.5))
    recorded = 0
    while recorded < 700:
        recorded += recorder.sample().count
    recorder.stop()

    reader = target_worker(input=out, input_evaluation=["is", "wis", "dr"])
    try:
        batches, read = [], 0
        while read < recorded:
            batches.append(reader.sample())
            read += batches[-1].count
        estimates = reader.get_metrics()
        assert [e for e in reader.get_metrics() if hasattr(e, "estimator_name")] == []
        # the same batches through an estimator of its own give the same DR estimates
        own_dr = DoublyRobust(reader.get_policy(), 1.0)
        for batch in batches:
            own_dr.process(batch)
        expected_dr = [e.metrics["V_step_DR"] for e in own_dr.get_metrics()]
    finally:
        reader.stop()
    by_name = {name: [e.metrics for e in estimates if getattr(e, "estimator_name", "") == name]
               for name in ("is", "wis", "dr")}
    episodes = [piece for batch in batches for piece in batch.split_by_episode()]
    assert len(by_name["wis"]) == len(by_name["dr"]) == len(episodes) >= 20
    # every episode of the pass is weighted with one normaliser over the whole pass
    assert np.mean([m["V_step_WIS"] for m in by_name["wis"]]) == pytest.approx(
        per_decision_wis(episodes, TARGET_PUSH_RIGHT), rel=1e-6)  # float32 likelihoods
    assert [m["V_step_DR"] for m in by_name["dr"]] == pytest.approx(expected_dr, rel=1e-9)
    assert [m["V_prev"] for m in by_name["dr"]] == pytest.approx(
        [m["V_prev"] for m in by_name["is"]])
    # the target's estimated return is below the uniform data's (pushing right fails sooner)
    assert np.mean([m["V_step_DR"] for m in by_name["dr"]]) < np.mean(
        [m["V_prev"] for m in by_name["dr"]])


@pytest.mark.timeout(120)
def test_unknown_estimator_names_are_refused_with_the_choices(tmp_path):
    out = str(tmp_path / "uniform")
    recorder = target_worker(output=out)
    recorder.sample()
    recorder.stop()
    with pytest.raises(errors.InvalidConfigError, match=r"'doubly_robust'.*\['dm', 'dr', 'is',"):
        target_worker(input=out, input_evaluation=["is", "doubly_robust"])
