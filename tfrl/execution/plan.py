"""`ExecutionPlan`: what a trainer declared with `execution_plan=` holds of its plan, in the
execution layer. It stands where other trainers hold their policy optimizer
(`trainer.optimizer`): it gives the next result, and saves and restores the plan's counters
with the trainer's checkpoints (the contents of a plan's replay buffers are not saved, as in
classic RLlib).
"""
from __future__ import annotations

from typing import Callable

from tfrl.execution.local_iterator import LocalIterator
from tfrl.execution.metrics_context import (STEPS_SAMPLED_COUNTER, STEPS_TRAINED_COUNTER,
                                            MetricsContext, active_metrics)


class ExecutionPlan:
    """Builds `plan_fn(workers, config)` (with a metrics context active, so that operators
    may read it while being built) and pulls results from it.

    Raises (constructor):
      TypeError: plan_fn returned something that is not an iterator of results.
      whatever plan_fn raises.
    """

    def __init__(self, plan_fn: Callable, workers, config: dict):
        self.workers = workers
        with active_metrics(MetricsContext()):
            plan = plan_fn(workers, config)
        if not isinstance(plan, LocalIterator):
            if not hasattr(plan, "__next__"):
                raise TypeError(f"an execution plan must return an iterator of result dicts "
                                f"(a LocalIterator); {getattr(plan_fn, '__name__', plan_fn)} "
                                f"returned {type(plan).__name__}")
            plan = LocalIterator(lambda _timeout=None, it=plan: it, name="plan")
        self.plan = plan

    @property
    def metrics(self) -> MetricsContext:
        """The plan's shared metrics context (counters, timers, info)."""
        return self.plan.shared_metrics.get()

    @property
    def num_steps_sampled(self) -> int:
        return int(self.metrics.counters[STEPS_SAMPLED_COUNTER])

    @property
    def num_steps_trained(self) -> int:
        return int(self.metrics.counters[STEPS_TRAINED_COUNTER])

    def next_result(self) -> dict:
        """The plan's next result dict.

        Raises:
          StopIteration: the plan ended.
          TypeError: the plan yielded something that is not a dict.
        """
        result = next(self.plan)
        if not isinstance(result, dict):
            raise TypeError(f"an execution plan must yield result dicts (StandardMetricsReporting"
                            f"); it yielded {type(result).__name__}")
        return result

    def save(self) -> dict:
        """The plan's counters (what checkpoints keep of it)."""
        counters = {k: int(v) for k, v in self.metrics.counters.items()}
        return {"num_steps_sampled": self.num_steps_sampled,
                "num_steps_trained": self.num_steps_trained, "counters": counters}

    def restore(self, state: dict) -> None:
        """Sets the counters `save()` returned.

        Raises:
          KeyError: state lacks num_steps_sampled.
        """
        counters = self.metrics.counters
        counters.update({k: int(v) for k, v in (state.get("counters") or {}).items()})
        counters[STEPS_SAMPLED_COUNTER] = int(state["num_steps_sampled"])
        counters[STEPS_TRAINED_COUNTER] = int(state.get("num_steps_trained", 0))

    def stop(self) -> None:
        """Nothing to release: the workers are the trainer's."""
