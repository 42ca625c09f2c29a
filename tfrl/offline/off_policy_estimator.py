"""Off-policy estimators: how well the current policy would do, judged on recorded episodes.

With `input_evaluation: ["is", "wis"]`, a rollout worker that reads recorded files runs each
estimator on every batch it reads, with its current policy as the target policy; each whole
episode in the batch gives one `OffPolicyEstimate` (tfrl/rollout/metrics.py), reported like
episode metrics and averaged under `result["off_policy_estimator"][<name>]`:

- `V_prev`: the discounted return the behaviour policy got in the recorded episodes;
- `V_step_IS` / `V_step_WIS`: the estimated discounted return of the target policy;
- `V_gain_est`: their ratio.

Per-decision importance sampling (Precup et al. 2000, as in classic RLlib): with
p_t = prod_{s<=t} pi(a_s|o_s) / mu(a_s|o_s), IS estimates sum_t gamma^t p_t r_t; weighted IS
divides p_t by the mean of p_t over all episodes seen so far (biased, lower variance; see
WeightedImportanceSampling for the normaliser). The behaviour probabilities mu come from the
recorded `action_prob` (or `action_logp`), which `output` records. Episodes are estimated only when the batch holds them
whole (record with `batch_mode: complete_episodes`).
"""
from __future__ import annotations

from typing import Dict, List, Type

import numpy as np

from tfrl import errors
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.metrics import OffPolicyEstimate


class OffPolicyEstimator:
    """Base class: `process(batch)` returns one OffPolicyEstimate per whole episode.

    Args:
      policy: the target policy (a TFPolicy with `compute_log_likelihoods`).
      gamma: the discount of the estimated return.
    """

    name = ""

    def __init__(self, policy, gamma: float):
        self.policy = policy
        self.gamma = gamma

    def process(self, batch: SampleBatch) -> List[OffPolicyEstimate]:
        """Estimates for every whole episode of `batch` (pieces of episodes are skipped).

        Raises:
          InvalidBatchError: the batch has neither action_prob nor action_logp.
          NotSupportedError: a target policy without action likelihoods (recurrent, or an
            action_sampler_fn policy such as DQN).
        """
        episodes = []
        for episode in _whole_episodes(batch):
            rewards = np.asarray(episode[SampleBatch.REWARDS], np.float64)
            behaviour = _behaviour_probs(episode)
            target = np.exp(self.policy.compute_log_likelihoods(
                episode[SampleBatch.ACTIONS], episode[SampleBatch.OBS]).astype(np.float64))
            episodes.append((rewards, np.cumprod(target / np.maximum(behaviour, 1e-12))))
        self._observe([ratios for _, ratios in episodes])
        estimates = []
        for rewards, ratios in episodes:
            discounts = self.gamma ** np.arange(len(rewards))
            v_prev = float(np.sum(discounts * rewards))
            v_new = float(np.sum(discounts * self._weights(ratios) * rewards))
            estimates.append(OffPolicyEstimate(self.name, self._metrics(v_prev, v_new)))
        return estimates

    def _observe(self, cumulative_ratios: List[np.ndarray]) -> None:
        """Sees the cumulative ratios of a batch's episodes before they are weighted."""

    def _weights(self, cumulative_ratios: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _metrics(self, v_prev: float, v_new: float) -> Dict[str, float]:
        raise NotImplementedError


class ImportanceSampling(OffPolicyEstimator):
    """Per-decision importance sampling ("is")."""

    name = "is"

    def _weights(self, cumulative_ratios):
        return cumulative_ratios

    def _metrics(self, v_prev, v_new):
        return {"V_prev": v_prev, "V_step_IS": v_new, "V_gain_est": v_new / max(1e-8, v_prev)}


class WeightedImportanceSampling(OffPolicyEstimator):
    """Per-decision weighted importance sampling ("wis"). The normaliser of step t is the mean
    cumulative ratio at t over every episode this estimator has seen, an episode that ended
    before t counting with its final ratio (its ratio no longer changes; without this, short
    episodes would be left out of the normaliser and the estimate biased towards long ones).
    The running sums include the current batch before it is weighted."""

    name = "wis"

    def __init__(self, policy, gamma: float):
        super().__init__(policy, gamma)
        self.reached_sums = np.zeros(0)  # [t]: sum of p_t over episodes that reached t
        self.ended_sums = np.zeros(1)  # [n]: sum of final ratios of episodes of length n
        self.num_episodes = 0

    def _observe(self, cumulative_ratios):
        for ratios in cumulative_ratios:
            n = len(ratios)
            if n + 1 > len(self.ended_sums):
                self.ended_sums = np.pad(self.ended_sums, (0, n + 1 - len(self.ended_sums)))
                self.reached_sums = np.pad(self.reached_sums, (0, n - len(self.reached_sums)))
            self.reached_sums[:n] += ratios
            self.ended_sums[n] += ratios[-1]
            self.num_episodes += 1

    def _weights(self, cumulative_ratios):
        n = len(cumulative_ratios)
        normaliser = (self.reached_sums[:n] + np.cumsum(self.ended_sums)[:n]) / self.num_episodes
        return cumulative_ratios / np.maximum(normaliser, 1e-12)

    def _metrics(self, v_prev, v_new):
        return {"V_prev": v_prev, "V_step_WIS": v_new, "V_gain_est": v_new / max(1e-8, v_prev)}


ESTIMATORS: Dict[str, Type[OffPolicyEstimator]] = {
    ImportanceSampling.name: ImportanceSampling,
    WeightedImportanceSampling.name: WeightedImportanceSampling,
}


def make_estimators(names, policy, gamma: float) -> List[OffPolicyEstimator]:
    """The estimators `input_evaluation` names, for `policy`.

    Raises:
      InvalidConfigError: an unknown estimator name.
    """
    estimators = []
    for name in names:
        if name not in ESTIMATORS:
            raise errors.InvalidConfigError(
                f"input_evaluation: unknown estimator {name!r}; choose among "
                f"{sorted(ESTIMATORS)}")
        estimators.append(ESTIMATORS[name](policy, gamma))
    return estimators


def _behaviour_probs(episode: SampleBatch) -> np.ndarray:
    if SampleBatch.ACTION_PROB in episode:
        return np.asarray(episode[SampleBatch.ACTION_PROB], np.float64)
    if SampleBatch.ACTION_LOGP in episode:
        return np.exp(np.asarray(episode[SampleBatch.ACTION_LOGP], np.float64))
    raise errors.InvalidBatchError(
        "off-policy estimation needs the behaviour policy's action_prob (or action_logp) "
        f"column; the recorded batch has {sorted(episode.keys())}. Record with `output`, "
        "which stores them")


def _whole_episodes(batch: SampleBatch) -> List[SampleBatch]:
    """The episodes of `batch` that start at t = 0 and end (terminated or truncated) in it."""
    pieces = batch.split_by_episode() if SampleBatch.EPS_ID in batch else [batch]
    whole = []
    for piece in pieces:
        if piece.count == 0:
            continue
        ended = bool(np.asarray(piece[SampleBatch.TERMINATEDS])[-1]) or (
            SampleBatch.TRUNCATEDS in piece and bool(np.asarray(piece[SampleBatch.TRUNCATEDS])[-1]))
        starts = SampleBatch.T not in piece or int(np.asarray(piece[SampleBatch.T])[0]) == 0
        if ended and starts:
            whole.append(piece)
    return whole
