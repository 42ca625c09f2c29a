"""Episode metrics: what rollout workers report and how the driver summarises it.

A worker turns every finished episode into one `RolloutMetrics` and keeps them until asked
(`RolloutWorker.get_metrics()`, or the summary of a replay-writing `sample()`). The driver
gathers them from all workers (`collect_episodes`) and reduces them to RLlib's classic result
keys (`summarize_episodes`): episode_reward_mean/min/max, episode_len_mean, episodes_this_iter,
policy_reward_mean, custom_metrics (<name>_mean/_min/_max) and hist_stats.
"""
from __future__ import annotations

import collections
from typing import Any, Dict, Iterable, List, NamedTuple

import numpy as np


class RolloutMetrics(NamedTuple):
    episode_length: int
    episode_reward: float
    agent_rewards: Dict[Any, float]  # (agent_id, policy_id) -> return
    custom_metrics: Dict[str, float]
    hist_data: Dict[str, list]
    worker_index: int = 0


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
    """RLlib's classic episode statistics of `episodes` (NaN means when there are none)."""
    rewards = [e.episode_reward for e in episodes]
    lengths = [e.episode_length for e in episodes]
    policy_rewards = collections.defaultdict(list)
    custom = collections.defaultdict(list)
    hist_stats = {"episode_reward": rewards, "episode_lengths": lengths}
    for e in episodes:
        for (_, policy_id), value in e.agent_rewards.items():
            policy_rewards[policy_id].append(value)
        for name, value in e.custom_metrics.items():
            custom[name].append(value)
        for name, values in e.hist_data.items():
            hist_stats.setdefault(name, []).extend(values)
    custom_metrics = {}
    for name, values in custom.items():
        finite = [v for v in values if v is not None and np.isfinite(v)]
        custom_metrics[f"{name}_mean"] = float(np.mean(finite)) if finite else float("nan")
        custom_metrics[f"{name}_min"] = float(np.min(finite)) if finite else float("nan")
        custom_metrics[f"{name}_max"] = float(np.max(finite)) if finite else float("nan")
    nan = float("nan")
    return {
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
    }
