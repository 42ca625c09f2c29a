"""Off-policy estimators: how well the current policy would do, judged on recorded episodes.

With `input_evaluation: ["is", "wis", "dr", "dm"]` (any of them), a rollout worker that reads
recorded files hands each estimator every batch it reads (`process`), with its current policy
as the target policy, and collects the estimates with its metrics (`get_metrics`, the split of
RLlib classic's estimators). The episodes handed over between two `get_metrics` calls (one
training iteration) form one evaluation pass; each whole episode of the pass gives one
`OffPolicyEstimate`, reported like episode metrics and averaged under
`result["off_policy_estimator"][<name>]`:

- `V_prev`: the discounted return the behaviour policy got in the recorded episodes;
- `V_step_IS` / `V_step_WIS` / `V_step_DR` / `V_step_DM`: the estimated discounted return of
  the target policy;
- `V_gain_est`: their ratio.

With p_t = prod_{s<=t} pi(a_s|o_s) / mu(a_s|o_s), the cumulative importance ratio:

- "is", per-decision importance sampling (Precup et al. 2000, as in classic RLlib):
  sum_t gamma^t p_t r_t.
- "wis", per-decision (step-wise) weighted importance sampling: sum_t gamma^t (p_t / w_t) r_t,
  with w_t the mean of p_t over all the episodes of the pass, an episode that ended before t
  counting with its final ratio. The pass's estimate, the mean over its episodes, is then
  sum_t gamma^t (sum_i p_t^i r_t^i) / (sum_i p_t^i): the consistent weighted per-decision
  importance sampling of Thomas (2015, CWPDIS) and the step-wise WIS of Jiang & Li (2016), which
  take episodes of one common horizon; shorter episodes are padded to it with an absorbing state
  of reward 0 where both policies act alike (ratio 1), so p_t keeps the episode's final ratio.
  With that padding E_mu[p_t] = 1 and E_mu[p_t r_t] = E_pi[r_t] at every t, so each step's
  weighted mean converges to the target's expected reward at t. (Precup et al. 2000's weighted
  per-decision estimator divides every step by the mean ratio of the whole episodes instead,
  which Thomas 2015 shows is not consistent.)
  Classic RLlib's step-wise WIS averages only the episodes that reach t in w_t. Its step t
  then estimates the target's expected reward given that the episode is still running at t,
  weighted by the share of recorded episodes that reach t; with one reward per step (CartPole)
  the mean estimate is exactly the recorded (behaviour) return whatever the target policy.
  Classic RLlib also keeps w_t as a running mean over every episode seen so far, so its first
  episodes are normalised by a handful of others (an episode alone gets weight 1) and ratios of
  earlier target policies enter the normaliser. Normalising per pass is why the estimates come
  at `get_metrics` rather than with each batch.
- "dr", doubly robust (Jiang & Li 2016; per decision as in Thomas & Brunskill 2016): with a
  fitted Q model of the target policy and V(s) = sum_a pi(a|s) Q(s, a), backwards from
  V_DR = 0 after the last step, V_DR <- V(s_t) + rho_t (r_t + gamma V_DR - Q(s_t, a_t)), with
  rho_t = pi(a_t|o_t) / mu(a_t|o_t). Unbiased whatever the model when the behaviour
  probabilities are right; a good model takes most of importance sampling's variance away.
- "dm", the direct method: V(s_0) of the same fitted model (biased by the model's errors).

The Q model of "dr" and "dm" is fitted Q evaluation of the target policy (fitted_q.py: linear
in Gaussian features of the observation, one weight block per action; discrete actions only)
on the recorded episodes of the pass, cross-fitted: the pass's episodes are split in two halves
(alternating in the order they were read), and each half is estimated with the model fitted on
the other half, so no episode corrects a model fitted on itself. A pass of one episode is
estimated with a model fitted on that episode.

The behaviour probabilities mu come from the recorded `action_prob` (or `action_logp`), which
`output` records. Episodes are estimated only when a batch holds them whole (record with
`batch_mode: complete_episodes`). A pass that grows past `MAX_PASS_STEPS` recorded steps
without a `get_metrics` call is estimated there and a new pass begins. Where results bring
their episodes with them (the asynchronous strategies: A3C's gradients, Ape-X's sample
summaries, the sharded parameter server), `get_metrics` runs once per fragment, so a pass is one
fragment: WIS is then normalised over few episodes, and DR's model is fitted on few; record and
read larger fragments there.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Type

import numpy as np
import tree

from tfrl import errors
from tfrl.offline.fitted_q import FittedQEvaluation, FQEEpisode
from tfrl.policy.sample_batch import SampleBatch, concat_samples

MAX_PASS_STEPS = 50_000  # bounds the memory of a pass (and of the Q model's features)
MAX_Q_MODEL_OBS_SIZE = 256  # flattened observation numbers the linear Q model accepts


class OffPolicyEstimate(NamedTuple):
    """One off-policy estimate of one recorded episode; reported beside the episodes and
    summarised under `off_policy_estimator/<name>/` (tfrl/rollout/metrics.py)."""

    estimator_name: str
    metrics: Dict[str, float]


class RecordedEpisode(NamedTuple):
    """One whole recorded episode with what the estimators need of it.

    rewards, behaviour_probs, target_probs: [T] (the probabilities of the recorded actions);
    obs: [T, d] the flattened observations and actions: [T] (only for the Q model's estimators,
    else None); all_target_probs: [T, num_actions], pi(a | o_t) for every action (idem).
    """

    rewards: np.ndarray
    behaviour_probs: np.ndarray
    target_probs: np.ndarray
    obs: Optional[np.ndarray] = None
    actions: Optional[np.ndarray] = None
    all_target_probs: Optional[np.ndarray] = None

    @property
    def cumulative_ratios(self) -> np.ndarray:
        return np.cumprod(self.target_probs / np.maximum(self.behaviour_probs, 1e-12))


class OffPolicyEstimator:
    """Base class: `process(batch)` keeps the whole episodes of a batch, `get_metrics()`
    returns one OffPolicyEstimate per episode kept since the last call (module docstring).

    Args:
      policy: the target policy (a TFPolicy with `compute_log_likelihoods`).
      gamma: the discount of the estimated return.
    """

    name = ""
    value_metric = ""
    uses_q_model = False

    def __init__(self, policy, gamma: float):
        self.policy = policy
        self.gamma = gamma
        self._pass: List[RecordedEpisode] = []
        self._pass_steps = 0
        self._ready: List[OffPolicyEstimate] = []

    def process(self, batch: SampleBatch) -> None:
        """Keeps every whole episode of `batch` for this pass (pieces of episodes are skipped),
        with the target policy's probabilities of its actions as the policy is now.

        Raises:
          InvalidBatchError: the batch has neither action_prob nor action_logp.
          NotSupportedError: a target policy without action likelihoods (recurrent, or an
            action_sampler_fn policy such as DQN); for "dr" and "dm", an observation of more
            than MAX_Q_MODEL_OBS_SIZE numbers.
        """
        episodes = _whole_episodes(batch)
        if not episodes:
            return
        joined = concat_samples(episodes) if len(episodes) > 1 else episodes[0]
        obs, actions = joined[SampleBatch.OBS], np.asarray(joined[SampleBatch.ACTIONS])
        if self.uses_q_model:
            all_probs = np.stack([np.exp(self.policy.compute_log_likelihoods(
                np.full_like(actions, a), obs).astype(np.float64))
                for a in range(self.policy.action_space.n)], axis=1)
            target = all_probs[np.arange(len(actions)), actions.astype(np.int64)]
            flat_obs = _flat_observations(obs)
        else:
            target = np.exp(self.policy.compute_log_likelihoods(actions, obs).astype(np.float64))
        start = 0
        for episode in episodes:
            rows = slice(start, start + episode.count)
            start += episode.count
            kept = RecordedEpisode(
                np.asarray(episode[SampleBatch.REWARDS], np.float64), _behaviour_probs(episode),
                target[rows])
            if self.uses_q_model:
                kept = kept._replace(obs=flat_obs[rows], actions=actions[rows],
                                     all_target_probs=all_probs[rows])
            self._pass.append(kept)
            self._pass_steps += episode.count
        if self._pass_steps >= MAX_PASS_STEPS:
            self._ready.extend(self._end_pass())

    def get_metrics(self) -> List[OffPolicyEstimate]:
        """The estimates of the episodes kept since the last call (this ends the pass)."""
        estimates = self._ready + self._end_pass()
        self._ready = []
        return estimates

    def _end_pass(self) -> List[OffPolicyEstimate]:
        episodes, self._pass, self._pass_steps = self._pass, [], 0
        if not episodes:
            return []
        values = self.estimate_pass(episodes)
        estimates = []
        for episode, v_new in zip(episodes, values):
            v_prev = float(np.sum(self._discounts(len(episode.rewards)) * episode.rewards))
            estimates.append(OffPolicyEstimate(self.name, {
                "V_prev": v_prev, self.value_metric: float(v_new),
                "V_gain_est": float(v_new) / max(1e-8, v_prev)}))
        return estimates

    def estimate_pass(self, episodes: List[RecordedEpisode]) -> List[float]:
        """The target's estimated return for each episode of a pass (their mean is the
        estimator's estimate of the pass)."""
        raise NotImplementedError

    def _discounts(self, length: int) -> np.ndarray:
        return self.gamma ** np.arange(length)


class ImportanceSampling(OffPolicyEstimator):
    """Per-decision importance sampling ("is")."""

    name = "is"
    value_metric = "V_step_IS"

    def estimate_pass(self, episodes):
        return [float(np.sum(self._discounts(len(e.rewards)) * e.cumulative_ratios * e.rewards))
                for e in episodes]


class WeightedImportanceSampling(OffPolicyEstimator):
    """Per-decision weighted importance sampling ("wis", CWPDIS), normalised over the pass:
    the normaliser of step t is the mean cumulative ratio at t over all the pass's episodes, an
    episode that ended before t counting with its final ratio (the absorbing-state padding of
    the module docstring). Normalising over only the episodes that reach t, as classic RLlib
    does, would weight step t by how many recorded episodes last that long, i.e. by the
    behaviour's episode lengths rather than the target's."""

    name = "wis"
    value_metric = "V_step_WIS"

    def estimate_pass(self, episodes):
        ratios = [e.cumulative_ratios for e in episodes]
        longest = max(len(r) for r in ratios)
        reached_sums = np.zeros(longest)  # [t]: sum of p_t over episodes that reached t
        ended_sums = np.zeros(longest + 1)  # [n]: sum of final ratios of episodes of length n
        for r in ratios:
            reached_sums[:len(r)] += r
            ended_sums[len(r)] += r[-1]
        normaliser = (reached_sums + np.cumsum(ended_sums)[:longest]) / len(ratios)
        return [float(np.sum(self._discounts(len(r)) * r / np.maximum(normaliser[:len(r)], 1e-12)
                             * e.rewards)) for r, e in zip(ratios, episodes)]


class _QModelEstimator(OffPolicyEstimator):
    """Estimators reading a cross-fitted FQE model of the target policy (module docstring)."""

    uses_q_model = True

    def estimate_pass(self, episodes):
        halves = [list(range(0, len(episodes), 2)), list(range(1, len(episodes), 2))]
        values: List[float] = [0.0] * len(episodes)
        for estimated, fitted_on in ((halves[0], halves[1]), (halves[1], halves[0])):
            if not estimated:
                continue
            model = self.fit_q_model([episodes[i] for i in (fitted_on or estimated)])
            for i in estimated:
                values[i] = self.episode_value(episodes[i], model)
        return values

    def fit_q_model(self, episodes: List[RecordedEpisode]) -> FittedQEvaluation:
        """The FQE model of the target policy fitted on `episodes`."""
        return FittedQEvaluation(self.policy.action_space.n, self.gamma).fit([
            FQEEpisode(e.obs, e.actions, e.rewards, e.all_target_probs) for e in episodes])

    def episode_value(self, episode: RecordedEpisode, model: FittedQEvaluation) -> float:
        raise NotImplementedError


class DoublyRobust(_QModelEstimator):
    """Doubly robust estimation ("dr") with a cross-fitted FQE model (module docstring)."""

    name = "dr"
    value_metric = "V_step_DR"

    def episode_value(self, episode, model):
        q = model.q_values(episode.obs)
        return doubly_robust_return(
            episode.rewards, episode.target_probs / np.maximum(episode.behaviour_probs, 1e-12),
            q[np.arange(len(q)), episode.actions.astype(np.int64)],
            np.sum(episode.all_target_probs * q, axis=1), self.gamma)


class DirectMethod(_QModelEstimator):
    """The direct method ("dm"): the cross-fitted FQE model's value of the first state."""

    name = "dm"
    value_metric = "V_step_DM"

    def episode_value(self, episode, model):
        q = model.q_values(episode.obs[:1])
        return float(np.sum(episode.all_target_probs[0] * q[0]))


def doubly_robust_return(rewards, step_ratios, q_taken, v_target, gamma: float) -> float:
    """The per-decision doubly robust estimate of one episode (Jiang & Li 2016): backwards from
    0 after the last step, V <- v_target[t] + step_ratios[t] * (rewards[t] + gamma * V -
    q_taken[t]).

    Args:
      rewards: [T] the recorded rewards.
      step_ratios: [T] pi(a_t|o_t) / mu(a_t|o_t) of the recorded actions (not cumulative).
      q_taken: [T] the model's Q(o_t, a_t) of the recorded actions.
      v_target: [T] the model's sum_a pi(a|o_t) Q(o_t, a).
      gamma: the discount.

    Raises:
      InvalidBatchError: the four arrays differ in length.
    """
    columns = [np.asarray(c, np.float64) for c in (rewards, step_ratios, q_taken, v_target)]
    if len({len(c) for c in columns}) != 1:
        raise errors.InvalidBatchError(
            "doubly_robust_return needs rewards, step_ratios, q_taken and v_target of one "
            f"length each; got lengths {[len(c) for c in columns]}")
    rewards, step_ratios, q_taken, v_target = columns
    value = 0.0
    for t in reversed(range(len(rewards))):
        value = v_target[t] + step_ratios[t] * (rewards[t] + gamma * value - q_taken[t])
    return float(value)


ESTIMATORS: Dict[str, Type[OffPolicyEstimator]] = {
    estimator.name: estimator
    for estimator in (ImportanceSampling, WeightedImportanceSampling, DoublyRobust, DirectMethod)
}


def make_estimators(names, policy, gamma: float) -> List[OffPolicyEstimator]:
    """The estimators `input_evaluation` names, for `policy`.

    Raises:
      InvalidConfigError: an unknown estimator name.
      NotSupportedError: "dr" or "dm" for a policy whose action space is not discrete.
    """
    estimators = []
    for name in names:
        if name not in ESTIMATORS:
            raise errors.InvalidConfigError(
                f"input_evaluation: unknown estimator {name!r}; choose among "
                f"{sorted(ESTIMATORS)}")
        estimator_class = ESTIMATORS[name]
        if estimator_class.uses_q_model and not hasattr(policy.action_space, "n"):
            raise errors.NotSupportedError(
                f"input_evaluation {name!r} fits a Q model with one output per action, so it "
                f"needs a discrete action space; this policy's is {policy.action_space}. Use "
                "'is' or 'wis' instead")
        estimators.append(estimator_class(policy, gamma))
    return estimators


def _flat_observations(obs) -> np.ndarray:
    leaves = [np.asarray(x, np.float64) for x in tree.flatten(obs)]
    flat = np.concatenate([x.reshape(len(x), -1) for x in leaves], axis=1)
    if flat.shape[1] > MAX_Q_MODEL_OBS_SIZE:
        raise errors.NotSupportedError(
            f"input_evaluation 'dr' and 'dm' fit a linear Q model on the flattened observation, "
            f"which holds {flat.shape[1]} numbers here (at most {MAX_Q_MODEL_OBS_SIZE} are "
            "supported); use 'is' or 'wis' for large observations")
    return flat


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
