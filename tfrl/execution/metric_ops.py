"""Metric operators of execution plans (classic `ray.rllib.execution.metric_ops`), in the
execution layer: turning a plan's training steps into classic result dicts.

A result holds the episode statistics of the workers (smoothed over
`metrics_smoothing_episodes`, as every tfrl trainer reports them), `timesteps_total` (the
num_steps_sampled counter), `timers` ({name}_time_ms, {name}_throughput) and `info`: what the
operators put there (the learner stats under "learner") plus every counter.
"""
from __future__ import annotations

import time
from typing import Any, List, Optional

from tfrl.execution.local_iterator import LocalIterator
from tfrl.execution.metrics_context import STEPS_SAMPLED_COUNTER, get_shared_metrics


def StandardMetricsReporting(train_op: LocalIterator, workers, config: dict,
                             selected_workers: Optional[List[Any]] = None) -> LocalIterator:
    """Result dicts of `train_op`'s steps, at most one per `timesteps_per_iteration` sampled
    env steps and per `min_iter_time_s` seconds (the config's keys; 0: every step).

    Raises:
      KeyError: config lacks timesteps_per_iteration, min_iter_time_s or
        metrics_smoothing_episodes (a trainer's merged config has them).
    """
    return (train_op
            .filter(OncePerTimestepsElapsed(config["timesteps_per_iteration"]))
            .filter(OncePerTimeInterval(config["min_iter_time_s"]))
            .for_each(CollectMetrics(workers, min_history=config["metrics_smoothing_episodes"],
                                     timeout_seconds=config.get("collect_metrics_timeout", 180),
                                     selected_workers=selected_workers)))


class CollectMetrics:
    """For `.for_each()`: the result dict of the episodes the workers finished since the last
    call (with earlier ones filling up a window of `min_history`) and the plan's metrics.

    Raises (when called):
      ray.exceptions.GetTimeoutError: a remote worker did not answer within timeout_seconds.
    """

    def __init__(self, workers, min_history: int = 100, timeout_seconds: float = 180,
                 selected_workers: Optional[List[Any]] = None):
        self.workers = workers
        self.episode_history: list = []
        self.min_history = min_history
        self.timeout_seconds = timeout_seconds
        self.selected_workers = selected_workers

    def __call__(self, _item) -> dict:
        from tfrl.rollout import collect_episodes, summarize_episodes

        remote = (self.selected_workers if self.selected_workers is not None
                  else self.workers.remote_workers())
        episodes = collect_episodes(self.workers.local_worker(), remote,
                                    timeout_seconds=self.timeout_seconds)
        missing = self.min_history - len(episodes)
        window = (self.episode_history[-missing:] if missing > 0 else []) + episodes
        self.episode_history = (self.episode_history + episodes)[-self.min_history:]
        result = summarize_episodes(window)
        result["episodes_this_iter"] = len(episodes)
        metrics = get_shared_metrics()
        timers = {}
        for name, timer in metrics.timers.items():
            timers[f"{name}_time_ms"] = round(1000 * timer.mean, 3)
            if timer.has_units_processed():
                timers[f"{name}_throughput"] = round(timer.mean_throughput, 3)
        result.update(num_healthy_workers=self.workers.num_healthy_workers(),
                      timesteps_total=metrics.counters[STEPS_SAMPLED_COUNTER],
                      timers=timers,
                      info={**metrics.info, **metrics.counters})
        return result


class OncePerTimeInterval:
    """For `.filter()`: true at most once per `delay` seconds (always when delay <= 0)."""

    def __init__(self, delay: float):
        self.delay = delay
        self.last_called = 0.0

    def __call__(self, _item) -> bool:
        if self.delay <= 0:
            return True
        now = time.time()
        if now - self.last_called > self.delay:
            self.last_called = now
            return True
        return False


class OncePerTimestepsElapsed:
    """For `.filter()`: true once `delay_steps` more env steps were sampled (the plan's
    num_steps_sampled counter) than at the last true (always when delay_steps <= 0)."""

    def __init__(self, delay_steps: int):
        self.delay_steps = delay_steps
        self.last_called = 0

    def __call__(self, _item) -> bool:
        if self.delay_steps <= 0:
            return True
        now = get_shared_metrics().counters[STEPS_SAMPLED_COUNTER]
        if now - self.last_called >= self.delay_steps:
            self.last_called = now
            return True
        return False
