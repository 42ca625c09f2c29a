"""`ParallelIterator`: the samples of a WorkerSet's remote rollout workers as shards (classic
`ray.util.iter.from_actors` over rollout workers), in the execution layer.

Each shard is one remote worker; an item of a shard is that worker's `sample()`, passed through
the `for_each` functions inside the worker. `gather_sync`, `gather_async` and
`batch_across_shards` turn the shards into a `LocalIterator` in the driver. A worker that
dies is replaced through the WorkerSet (its call's item is lost), as in every tfrl strategy.
"""
from __future__ import annotations

from typing import Any, Callable, List, Sequence

from tfrl.execution.local_iterator import LocalIterator
from tfrl.execution.metrics_context import SharedMetrics


def _sample_and_apply(worker, functions: Sequence[Callable[[Any], Any]]) -> Any:
    """Runs in a remote worker: one `sample()` passed through `functions`."""
    item = worker.sample()
    for fn in functions:
        item = fn(item)
    return item


class ParallelIterator:
    """The remote workers of `workers` as shards of sample batches.

    Args:
      workers: a WorkerSet with remote workers.
      functions: applied in the worker to each item, in order (`for_each` adds one).
    """

    def __init__(self, workers, functions: Sequence[Callable[[Any], Any]] = ()):
        self.workers = workers
        self.functions = list(functions)

    def num_shards(self) -> int:
        return self.workers.num_remote_workers()

    def for_each(self, fn: Callable[[Any], Any]) -> "ParallelIterator":
        """Items mapped through `fn` inside the workers (`fn` must pickle)."""
        return ParallelIterator(self.workers, self.functions + [fn])

    def _call(self, worker):
        return worker.apply.remote(_sample_and_apply, self.functions)

    def _round(self) -> List[Any]:
        """One item from every remote worker, in worker order (those of failed workers lost).

        Raises:
          WorkerCrashedError: the remote workers failed to start; else what a worker raised,
            other than a worker failure.
        """
        refs = [(w, self._call(w)) for w in self.workers.remote_workers()]
        return self.workers.gather(refs)

    def batch_across_shards(self) -> LocalIterator:
        """Lists of one item per shard, a sampling round each."""
        def rounds(_timeout=None):
            while True:
                yield self._round()

        return LocalIterator(rounds, SharedMetrics(), name="ParallelIterator.batch_across_shards")

    def gather_sync(self) -> LocalIterator:
        """The items of each round, one by one, shard order within a round; a round starts
        when the driver has taken every item of the previous one."""
        def items(_timeout=None):
            while True:
                yield from self._round()

        return LocalIterator(items, SharedMetrics(), name="ParallelIterator.gather_sync")

    def gather_async(self, num_async: int = 1) -> LocalIterator:
        """The items in the order the workers finish them, with `num_async` calls in flight
        per worker.

        Raises (when pulled):
          ValueError: num_async < 1 (raised here).
          what a worker raised, other than a worker failure (that worker is replaced).
        """
        if num_async < 1:
            raise ValueError(f"num_async must be >= 1, got {num_async}")

        def items(_timeout=None):
            import ray

            from tfrl.rollout.worker_set import is_worker_failure

            in_flight = {}  # ref -> worker
            for worker in self.workers.remote_workers():
                for _ in range(num_async):
                    in_flight[self._call(worker)] = worker
            while in_flight:
                [ready], _ = ray.wait(list(in_flight), num_returns=1)
                worker = in_flight.pop(ready)
                try:
                    item = ray.get(ready)
                except Exception as exc:  # noqa: BLE001 - sorted into worker failures and others
                    if not is_worker_failure(exc):
                        raise
                    if worker in self.workers.remote_workers():
                        worker = self.workers.recreate_worker(worker, exc)
                    else:  # replaced already, through another of its calls
                        worker = None
                    if worker is not None:
                        in_flight[self._call(worker)] = worker
                    continue
                in_flight[self._call(worker)] = worker
                yield item

        return LocalIterator(items, SharedMetrics(), name="ParallelIterator.gather_async")

    def __repr__(self) -> str:
        return f"ParallelIterator[{self.num_shards()} shards]"
