"""Classic `ray.rllib.evaluation.metrics`: episode metrics of rollout workers."""
from typing import Any, Iterable, Sequence

from tfrl.rollout import metrics as _metrics
from tfrl.rollout.metrics import RolloutMetrics, summarize_episodes


def collect_episodes(local_worker: Any = None, remote_workers: Iterable[Any] = (),
                     to_be_collected: Sequence = (), timeout_seconds: float = 180.0) -> tuple:
    """Classic `(episodes, to_be_collected)`: the episodes the workers finished since they were
    last asked, and classic's pending metric futures, always `[]` (tfrl asks each worker once and
    waits for it).

    Raises:
      ray.exceptions.GetTimeoutError: a remote worker did not answer within `timeout_seconds`.
    """
    return _metrics.collect_episodes(local_worker, remote_workers, timeout_seconds), []


def collect_metrics(local_worker: Any = None, remote_workers: Iterable[Any] = (),
                    to_be_collected: Sequence = (), timeout_seconds: float = 180.0) -> dict:
    """The classic result dict (episode_reward_mean, episode_len_mean, ...) of the episodes the
    workers finished since they were last asked: `summarize_episodes(collect_episodes(...))`.
    `to_be_collected` (classic's pending metric futures) is not used: tfrl asks each worker once.

    Raises:
      ray.exceptions.GetTimeoutError: a remote worker did not answer within `timeout_seconds`.
    """
    return summarize_episodes(_metrics.collect_episodes(local_worker, remote_workers,
                                                        timeout_seconds))


__all__ = ["collect_metrics", "collect_episodes", "summarize_episodes", "RolloutMetrics"]
