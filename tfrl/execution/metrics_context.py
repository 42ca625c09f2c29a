"""The metrics an execution plan's operators share (classic `MetricsContext`), in the execution
layer: `counters` (a defaultdict(int): num_steps_sampled, num_steps_trained, ...), `timers`
(name -> `Timer`), `info` (e.g. the learner stats under "learner").

Every iterator of one plan holds the same `MetricsContext` (chaining keeps it; union and
duplicate rebind their parents to one context). While an iterator is pulled its context is
the active one, which operators read through `get_shared_metrics()`.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Dict, List, Optional

from tfrl.optimizers.policy_optimizer import TimerStat

# counters (keys of MetricsContext.counters)
STEPS_SAMPLED_COUNTER = "num_steps_sampled"
STEPS_TRAINED_COUNTER = "num_steps_trained"
LAST_TARGET_UPDATE_TS = "last_target_update_ts"
NUM_TARGET_UPDATES = "num_target_updates"
# timers (keys of MetricsContext.timers)
APPLY_GRADS_TIMER = "apply_grad"
COMPUTE_GRADS_TIMER = "compute_grads"
WORKER_UPDATE_TIMER = "update"
GRAD_WAIT_TIMER = "grad_wait"
SAMPLE_TIMER = "sample"
LEARN_ON_BATCH_TIMER = "learn"
LOAD_BATCH_TIMER = "load"
# info (keys of MetricsContext.info)
LEARNER_INFO = "learner"


class Timer(TimerStat):
    """tfrl's `TimerStat`, usable as `with timer:` and counting the units (e.g. env steps)
    processed, for a throughput."""

    def __init__(self):
        super().__init__()
        self._start: Optional[float] = None
        self.units_processed: List[float] = []

    def __enter__(self):
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.push(time.perf_counter() - self._start)
        self._start = None

    def push_units_processed(self, n: float) -> None:
        self.units_processed.append(float(n))

    def has_units_processed(self) -> bool:
        return bool(self.units_processed)

    @property
    def mean_units_processed(self) -> float:
        return sum(self.units_processed) / len(self.units_processed) if self.units_processed else 0.0

    @property
    def mean_throughput(self) -> float:
        """Units per second over all pushes (0.0 before any)."""
        return sum(self.units_processed) / self.total if self.total > 0 else 0.0


class MetricsContext:
    """What one execution plan's operators share (see module doc)."""

    def __init__(self):
        self.counters: Dict[str, int] = collections.defaultdict(int)
        self.timers: Dict[str, Timer] = collections.defaultdict(Timer)
        self.info: dict = {}


class SharedMetrics:
    """The holder of an iterator's context. A holder made over parent holders (a union's, a
    duplicate's) rebinds every ancestor to its own context, so the whole plan shares one."""

    def __init__(self, metrics: Optional[MetricsContext] = None,
                 parents: Optional[List["SharedMetrics"]] = None):
        self.parents = list(parents or [])
        self.metrics = metrics or MetricsContext()
        self.set(self.metrics)

    def set(self, metrics: MetricsContext) -> None:
        self.metrics = metrics
        for parent in self.parents:
            parent.set(metrics)

    def get(self) -> MetricsContext:
        return self.metrics


_active = threading.local()


class active_metrics:
    """`with active_metrics(context):` makes `context` what `get_shared_metrics()` returns (and
    restores the previous one after)."""

    def __init__(self, metrics: MetricsContext):
        self.metrics = metrics
        self._previous = None

    def __enter__(self) -> MetricsContext:
        self._previous = getattr(_active, "metrics", None)
        _active.metrics = self.metrics
        return self.metrics

    def __exit__(self, *exc):
        _active.metrics = self._previous


def get_shared_metrics() -> MetricsContext:
    """The metrics context of the execution plan whose iterator is being pulled (or built).

    Raises:
      RuntimeError: called outside any plan iterator's pull (classic RLlib's ValueError case).
    """
    metrics = getattr(_active, "metrics", None)
    if metrics is None:
        raise RuntimeError("get_shared_metrics() is only available while an execution plan's "
                           "iterator is pulled, or while a trainer builds its plan")
    return metrics


def global_vars() -> dict:
    """What the plan's training operators send to the workers: {"timestep": steps sampled}.

    Raises:
      RuntimeError: outside a plan iterator's pull (see `get_shared_metrics`).
    """
    return {"timestep": get_shared_metrics().counters[STEPS_SAMPLED_COUNTER]}
