"""PolicyOptimizer: the base of every distributed training strategy (RLlib's policy optimizers).

A policy optimizer owns all distributed execution of one trainer: it drives the rollout workers
(Ray actors), the replay tables they write into, and the learner; the policy never knows which
optimizer runs it. `step()` is one round of sampling and learning; the counters and timings it
keeps appear in the trainer's result under `info`.
"""
from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Dict, Optional


class TimerStat:
    """Running mean of the durations of a repeated piece of work (seconds)."""

    def __init__(self):
        self.total = 0.0
        self.count = 0
        self.last = 0.0

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def push(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1
        self.last = seconds


def nest_model_metrics(stats):
    """`stats` with each "model/<name>" entry (a model's metrics(), tfrl.policy.tf_policy) moved
    under a "model" dict, at any depth: classic RLlib reports them as
    info/learner/<policy>/model/<name>."""
    if not isinstance(stats, dict):
        return stats
    nested: dict = {}
    model: dict = {}
    for key, value in stats.items():
        if isinstance(key, str) and key.startswith("model/"):
            model[key[len("model/"):]] = value
        else:
            nested[key] = nest_model_metrics(value)
    if model:
        nested["model"] = model
    return nested


def optimizer_config(workers, config: Optional[dict], settings: dict) -> dict:
    """An optimizer's config: `config` (None: the WorkerSet's config) updated with the keyword
    `settings`; `config` itself when there are none (the trainer's dict, shared)."""
    if config is None:
        config = dict(getattr(workers, "config", None) or {})
    return dict(config, **settings) if settings else config


class PolicyOptimizer:
    """Base class. Subclasses implement `step()` and keep `num_steps_sampled/trained` current.
    Those that stream data through replay tables set `uses_replay`.

    Args:
      workers: the trainer's WorkerSet (a local worker plus remote Ray actors).
      config: the trainer's merged config (None: the workers' config).
      replay: the trainer's ReplayService; optimizers that stream data declare their tables on
        it and start it. None: such an optimizer starts (and stops) one of its own.
      **settings: config keys given as keywords, classic RLlib's form
        (`AsyncGradientsOptimizer(workers, grads_per_step=100)`); they override `config`.
    """

    uses_replay = False

    def __init__(self, workers, config: Optional[dict] = None, replay=None, **settings):
        self.workers = workers
        self.config = optimizer_config(workers, config, settings)
        self._own_replay = None
        if replay is None and self.uses_replay:
            from tfrl import runtime
            from tfrl.replay_hosting import ReplayService

            replay = self._own_replay = ReplayService(self.config)
            runtime.stop_at_exit(self)  # a script may end without stop()
        self.replay = replay
        self.num_steps_sampled = 0
        self.num_steps_trained = 0
        self.timers: Dict[str, TimerStat] = defaultdict(TimerStat)
        self.learner_stats: Dict[str, dict] = {}
        self._new_episodes: list = []  # finished since the last collect_metrics
        self._episode_history: list = []

    @contextmanager
    def timer(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timers[name].push(time.perf_counter() - start)

    def step(self) -> dict:
        """One round of sampling and learning; returns the learner stats per policy."""
        raise NotImplementedError

    def activate(self) -> None:
        """Takes over the workers from another strategy (AdaptiveOptimizer's switches): learning
        goes on from the driver policy's state. Nothing to do for most strategies."""

    def ready(self) -> bool:
        """Whether this strategy's own actors (if any) have started, so a first step would not
        wait for them; AdaptiveOptimizer runs the ready ones' trials first."""
        return True

    def deactivate(self) -> None:
        """Hands the workers over to another strategy: nothing of this one stays in flight, and
        the driver policy holds the state learned so far."""

    def stats(self) -> dict:
        return {
            "num_steps_sampled": self.num_steps_sampled,
            "num_steps_trained": self.num_steps_trained,
            **{f"{name}_time_ms": round(1000 * t.mean, 3) for name, t in self.timers.items()},
        }

    def collect_metrics(self, smoothing_episodes: int = 100) -> dict:
        """RLlib's classic result dict: episode statistics plus `info` (counters, timings,
        learner stats). When fewer than `smoothing_episodes` episodes ended this iteration, the
        most recent earlier ones fill up the window, so the means move smoothly."""
        from tfrl.rollout import summarize_episodes
        from tfrl.offline.off_policy_estimator import OffPolicyEstimate

        episodes = self._new_episodes + self.fetch_worker_episodes()
        self._new_episodes = []
        # off-policy estimates are reported for this iteration only, never smoothed
        estimates = [e for e in episodes if isinstance(e, OffPolicyEstimate)]
        episodes = [e for e in episodes if not isinstance(e, OffPolicyEstimate)]
        missing = smoothing_episodes - len(episodes)
        window = (self._episode_history[-missing:] if missing > 0 else []) + episodes
        self._episode_history = (self._episode_history + episodes)[-smoothing_episodes:]
        result = summarize_episodes(window + estimates)
        result["episodes_this_iter"] = len(episodes)
        result["timesteps_total"] = self.num_steps_sampled
        result["num_healthy_workers"] = self.workers.num_healthy_workers()
        result["info"] = {"learner": nest_model_metrics(self.learner_stats), **self.stats()}
        return result

    # True where every remote worker's result (a sample summary, a gradient) brings the episodes
    # it finished: its workers are busy between steps, and a call asking for them would wait
    # behind the work in flight (behind the slowest worker)
    results_bring_episodes = False

    def _keep_episodes_of(self, refs: list) -> None:
        """Keeps the episodes that the finished results `refs` bring (their last element);
        results of workers that died bring none."""
        import ray

        for ref in refs:
            try:
                self._new_episodes.extend(ray.get(ref)[-1])
            except ray.exceptions.RayError:
                continue

    def fetch_worker_episodes(self) -> list:
        """Episodes the workers finished that no result brought (asks every worker)."""
        from tfrl.rollout import collect_episodes

        if self.results_bring_episodes and self.workers.remote_workers():
            return []

        return collect_episodes(self.workers.local_worker(), self.workers.remote_workers())

    def save(self) -> dict:
        return {"num_steps_sampled": self.num_steps_sampled, "num_steps_trained": self.num_steps_trained}

    def restore(self, state: dict) -> None:
        self.num_steps_sampled = state["num_steps_sampled"]
        self.num_steps_trained = state["num_steps_trained"]

    def stop(self) -> None:
        if self._own_replay is not None:
            self._own_replay.stop()
            self._own_replay = None
