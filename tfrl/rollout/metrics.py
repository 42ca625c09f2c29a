"""Episode metrics: what rollout workers report and how the driver summarises it.

A worker turns every finished episode into one `RolloutMetrics` and keeps them until asked
(`RolloutWorker.get_metrics()`, or the summary of a replay-writing `sample()`). The driver
gathers them from all workers (`collect_episodes`) and reduces them to RLlib's classic result
keys (`summarize_episodes`): episode_reward_mean/min/max, episode_len_mean, episodes_this_iter,
policy_reward_mean, custom_metrics (<name>_mean/_min/_max), hist_stats and sampler_perf.

`sampler_perf` is RLlib's classic split of a sampling step into env stepping (mean_env_wait_ms),
the policy's `compute_actions` (mean_inference_ms) and the runner's own bookkeeping
(mean_processing_ms, trajectory postprocessing included), each the mean per batched env step
since the worker started. A runner keeps the sums in a `SamplerPerfStats`; every finished
episode carries a snapshot of it, and the driver averages the snapshots over episodes.
"""
from __future__ import annotations

import collections
import time
from typing import Any, Dict, Iterable, List, NamedTuple

import numpy as np

from tfrl.offline.off_policy_estimator import OffPolicyEstimate


class RolloutMetrics(NamedTuple):
    episode_length: int
    episode_reward: float
    agent_rewards: Dict[Any, float]  # (agent_id, policy_id) -> return
    custom_metrics: Dict[str, float]
    hist_data: Dict[str, list]
    worker_index: int = 0
    perf_stats: Dict[str, float] = {}  # the runner's SamplerPerfStats.get() at episode end

    @classmethod
    def of_episode(cls, episode: Any, worker_index: int, perf_stats: Dict[str, float]):
        """The metrics of a finished `Episode` (what every env runner reports)."""
        return cls(episode.length, episode.total_reward, dict(episode.agent_rewards),
                   dict(episode.custom_metrics), dict(episode.hist_data), worker_index,
                   perf_stats)


class SamplerPerfStats:
    """Running sums of where a runner's sampling time goes (seconds), per batched env step.

    A runner calls `start_step()` when a step begins, reports the time of its `compute_actions`
    calls with `add_inference(seconds)` and of its env calls with `add_env_wait(seconds)`, and
    calls `end_step()` when the step's bookkeeping is done; everything in the step that is neither
    inference nor env time counts as processing. `add_processing(seconds)` adds work done outside
    a step (postprocessing).
    """

    def __init__(self):
        self.iters = 0
        self.env_wait_time = 0.0
        self.inference_time = 0.0
        self.processing_time = 0.0
        self._step_start = 0.0
        self._step_env_wait = 0.0
        self._step_inference = 0.0

    def start_step(self) -> None:
        self._step_start = time.perf_counter()
        self._step_env_wait = 0.0
        self._step_inference = 0.0

    def add_inference(self, seconds: float) -> None:
        self._step_inference += seconds

    def add_env_wait(self, seconds: float) -> None:
        self._step_env_wait += seconds

    def end_step(self) -> None:
        total = time.perf_counter() - self._step_start
        self.iters += 1
        self.env_wait_time += self._step_env_wait
        self.inference_time += self._step_inference
        self.processing_time += max(0.0, total - self._step_env_wait - self._step_inference)

    def add_processing(self, seconds: float) -> None:
        self.processing_time += seconds

    def get(self) -> Dict[str, float]:
        """The mean milliseconds per batched env step ({} before the first step)."""
        if not self.iters:
            return {}
        return {
            "mean_env_wait_ms": 1000.0 * self.env_wait_time / self.iters,
            "mean_inference_ms": 1000.0 * self.inference_time / self.iters,
            "mean_processing_ms": 1000.0 * self.processing_time / self.iters,
        }


def collect_episodes(local_worker: Any = None, remote_workers: Iterable[Any] = (),
                     timeout_seconds: float = 180.0) -> List[RolloutMetrics]:
    """Fetches the episodes finished since the last call from a local worker and remote actors.

    Raises:
      ray.exceptions.GetTimeoutError: a remote worker did not answer within `timeout_seconds`.
    """
    episodes: List[RolloutMetrics] = []
    remote_workers = list(remote_workers)
    if remote_workers:
        import ray

        for worker_episodes in ray.get([w.get_metrics.remote() for w in remote_workers],
                                       timeout=timeout_seconds):
            episodes.extend(worker_episodes)
    if local_worker is not None:
        episodes.extend(local_worker.get_metrics())
    return episodes


def summarize_episodes(episodes: List[RolloutMetrics]) -> dict:
    """RLlib's classic episode statistics of `episodes` (NaN means when there are none).

    OffPolicyEstimate entries among them are averaged per estimator under
    `off_policy_estimator` ({name: {metric: mean}}) and not counted as episodes.
    """
    estimates = [e for e in episodes if isinstance(e, OffPolicyEstimate)]
    episodes = [e for e in episodes if not isinstance(e, OffPolicyEstimate)]
    rewards = [e.episode_reward for e in episodes]
    lengths = [e.episode_length for e in episodes]
    policy_rewards = collections.defaultdict(list)
    custom = collections.defaultdict(list)
    perf = collections.defaultdict(list)
    hist_stats = {"episode_reward": rewards, "episode_lengths": lengths}
    for e in episodes:
        for (_, policy_id), value in e.agent_rewards.items():
            policy_rewards[policy_id].append(value)
        for name, value in e.custom_metrics.items():
            custom[name].append(value)
        for name, values in e.hist_data.items():
            hist_stats.setdefault(name, []).extend(values)
        for name, value in e.perf_stats.items():
            perf[name].append(value)
    custom_metrics = {}
    for name, values in custom.items():
        finite = [v for v in values if v is not None and np.isfinite(v)]
        custom_metrics[f"{name}_mean"] = float(np.mean(finite)) if finite else float("nan")
        custom_metrics[f"{name}_min"] = float(np.min(finite)) if finite else float("nan")
        custom_metrics[f"{name}_max"] = float(np.max(finite)) if finite else float("nan")
    nan = float("nan")
    result = {
        "episode_reward_mean": float(np.mean(rewards)) if rewards else nan,
        "episode_reward_min": float(np.min(rewards)) if rewards else nan,
        "episode_reward_max": float(np.max(rewards)) if rewards else nan,
        "episode_len_mean": float(np.mean(lengths)) if lengths else nan,
        "episodes_this_iter": len(episodes),
        "policy_reward_mean": {pid: float(np.mean(v)) for pid, v in policy_rewards.items()},
        "policy_reward_min": {pid: float(np.min(v)) for pid, v in policy_rewards.items()},
        "policy_reward_max": {pid: float(np.max(v)) for pid, v in policy_rewards.items()},
        "custom_metrics": custom_metrics,
        "hist_stats": hist_stats,
        "sampler_perf": {name: float(np.mean(v)) for name, v in perf.items()},
    }
    if estimates:
        result["off_policy_estimator"] = summarize_estimates(estimates)
    return result


def summarize_estimates(estimates: List[OffPolicyEstimate]) -> Dict[str, Dict[str, float]]:
    """{estimator name: {metric: mean over the estimates}}, plus `num_episodes`."""
    grouped: Dict[str, Dict[str, list]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for estimate in estimates:
        for name, value in estimate.metrics.items():
            grouped[estimate.estimator_name][name].append(value)
    return {estimator: {**{name: float(np.mean(values)) for name, values in metrics.items()},
                        "num_episodes": len(next(iter(metrics.values()), []))}
            for estimator, metrics in grouped.items()}
