"""`LocalIterator`, the iterator of classic RLlib's execution plans (`ray.util.iter`), in the
execution layer: a lazily built chain of transforms over a source, pulled in the driver.

An operator that has nothing to give yet yields a `NextValueNotReady` marker instead of
blocking (a replay buffer below `learning_starts`, a duplicated copy that ran ahead of its
twin), so that `union` can turn to its other sources. The transforms pass markers through
untouched; `next(it)` (and `for item in it`) skips them and returns the next real item.

One process, no threads: `union` pulls its sources in a fixed round-robin order whether it
was asked to be deterministic or not (classic RLlib's "async" union of local iterators pulled
up to 20 items of a source before turning to the next; here it is one item, or the source's
round-robin weight). Results therefore depend only on what the sources yield.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence

from tfrl.execution.metrics_context import MetricsContext, SharedMetrics, active_metrics


class NextValueNotReady(Exception):
    """Yielded (never raised) by an operator that has no item yet (classic
    `_NextValueNotReady`)."""


def _not_ready(item: Any) -> bool:
    return isinstance(item, NextValueNotReady)


class LocalIterator:
    """An iterator over a source with lazily applied transforms.

    Args:
      base_iterator: callable(timeout) -> iterable, the source (called once, at the first pull).
      shared_metrics: the holder of the plan's metrics context (a new one when None).
      local_transforms: functions iterator -> iterator applied to the source, in order.
      timeout: passed to `base_iterator` (unused by tfrl's sources).
      name: shown in repr.
    """

    def __init__(self, base_iterator: Callable[[Optional[float]], Iterable],
                 shared_metrics: Optional[SharedMetrics] = None,
                 local_transforms: Optional[List[Callable[[Iterator], Iterator]]] = None,
                 timeout: Optional[float] = None, name: Optional[str] = None):
        self.base_iterator = base_iterator
        self.shared_metrics = shared_metrics or SharedMetrics()
        self.local_transforms = list(local_transforms or [])
        self.timeout = timeout
        self.name = name or "LocalIterator[]"
        self._built: Optional[Iterator] = None

    # --- pulling ------------------------------------------------------------------------------
    def _build_once(self) -> None:
        if self._built is None:
            it = iter(self.base_iterator(self.timeout))
            for transform in self.local_transforms:
                it = transform(it)
            self._built = it

    def pull(self) -> Any:
        """The next item or a `NextValueNotReady` marker, with this iterator's metrics context
        active while the chain runs.

        Raises:
          StopIteration: the source is exhausted.
        """
        with active_metrics(self.shared_metrics.get()):
            self._build_once()
            return next(self._built)

    def __iter__(self) -> "LocalIterator":
        return self

    def __next__(self) -> Any:
        while True:
            item = self.pull()
            if not _not_ready(item):
                return item

    @staticmethod
    def get_metrics() -> MetricsContext:
        """The active plan's metrics context (classic `LocalIterator.get_metrics()`).

        Raises:
          RuntimeError: no plan iterator is being pulled.
        """
        from tfrl.execution.metrics_context import get_shared_metrics

        return get_shared_metrics()

    def _with(self, transform: Callable[[Iterator], Iterator], name: str) -> "LocalIterator":
        return LocalIterator(self.base_iterator, self.shared_metrics,
                             self.local_transforms + [transform], self.timeout,
                             f"{self.name}.{name}")

    # --- transforms ---------------------------------------------------------------------------
    def for_each(self, fn: Callable[[Any], Any]) -> "LocalIterator":
        """Items mapped through `fn`. A callable with an `_on_fetch_start()` method has it
        called before each pull from the source (ConcatBatches times its batches so)."""
        on_fetch_start = getattr(fn, "_on_fetch_start", None)

        def apply(it: Iterator) -> Iterator:
            while True:
                if on_fetch_start is not None:
                    on_fetch_start()
                try:
                    item = next(it)
                except StopIteration:
                    return
                yield item if _not_ready(item) else fn(item)

        return self._with(apply, f"for_each({_name_of(fn)})")

    def filter(self, fn: Callable[[Any], bool]) -> "LocalIterator":
        """The items for which `fn` is true."""
        def apply(it: Iterator) -> Iterator:
            for item in it:
                if _not_ready(item) or fn(item):
                    yield item

        return self._with(apply, f"filter({_name_of(fn)})")

    def flatten(self) -> "LocalIterator":
        """The elements of each item (each item an iterable)."""
        def apply(it: Iterator) -> Iterator:
            for item in it:
                if _not_ready(item):
                    yield item
                else:
                    yield from item

        return self._with(apply, "flatten()")

    def combine(self, fn: Callable[[Any], Sequence[Any]]) -> "LocalIterator":
        """The elements of `fn(item)`, a list of any length (empty: nothing for that item)."""
        return self.for_each(fn).flatten()

    def batch(self, n: int) -> "LocalIterator":
        """Lists of `n` consecutive items (a shorter last one when the source ends).

        Raises:
          ValueError: n < 1.
        """
        if n < 1:
            raise ValueError(f"batch size must be >= 1, got {n}")

        def apply(it: Iterator) -> Iterator:
            buffer = []
            for item in it:
                if _not_ready(item):
                    yield item
                    continue
                buffer.append(item)
                if len(buffer) >= n:
                    yield buffer
                    buffer = []
            if buffer:
                yield buffer

        return self._with(apply, f"batch({n})")

    def take(self, n: int) -> List[Any]:
        """The next `n` items (fewer when the source ends first)."""
        out = []
        for item in self:
            out.append(item)
            if len(out) >= n:
                break
        return out

    # --- splitting and merging ---------------------------------------------------------------
    def duplicate(self, n: int) -> List["LocalIterator"]:
        """`n` iterators that each yield every item of this one. They move in lockstep: a copy
        that has taken one item more than another copy yields not-ready until that one catches
        up, so nothing piles up (and a copy nobody pulls stalls the others).

        Raises:
          ValueError: n < 2.
        """
        if n < 2:
            raise ValueError(f"duplicate needs n >= 2, got {n}")
        queues = [collections.deque() for _ in range(n)]
        source = self

        def copy(i: int):
            def gen(_timeout=None):
                while True:
                    if queues[i]:
                        yield queues[i].popleft()
                    elif any(queues[j] for j in range(n) if j != i):
                        yield NextValueNotReady()  # ahead of a copy: let it catch up
                    else:
                        try:
                            item = source.pull()
                        except StopIteration:
                            return
                        if _not_ready(item):
                            yield item
                        else:
                            for queue in queues:
                                queue.append(item)
            return gen

        return [LocalIterator(copy(i), self.shared_metrics, name=f"{self.name}.duplicate[{i}]")
                for i in range(n)]

    def union(self, *others: "LocalIterator", deterministic: bool = False,
              round_robin_weights: Optional[List[Any]] = None) -> "LocalIterator":
        """The items of this iterator and `others`, interleaved round-robin: each round pulls
        every source that is not exhausted once, or `round_robin_weights[i]` times ("*": until
        it is not ready), turning to the next source early when one is not ready. A round that
        got nothing from any source yields not-ready. All sources share one metrics context
        from now on. `deterministic` is accepted for classic code and changes nothing (see
        module doc).

        Raises:
          TypeError: one of `others` is not a LocalIterator.
          ValueError: round_robin_weights has another length than the sources, or is all "*".
        """
        sources = [self, *others]
        for other in others:
            if not isinstance(other, LocalIterator):
                raise TypeError(f"union takes LocalIterators, got {type(other).__name__}")
        weights = list(round_robin_weights) if round_robin_weights else [1] * len(sources)
        if len(weights) != len(sources):
            raise ValueError(f"round_robin_weights has {len(weights)} entries for "
                             f"{len(sources)} sources")
        if all(w == "*" for w in weights):
            raise ValueError("round_robin_weights cannot all be '*'")

        def build_union(_timeout=None):
            active = list(zip(sources, weights))
            while active:
                got_any = False
                for entry in list(active):
                    source, weight = entry
                    pulled = 0
                    while weight == "*" or pulled < weight:
                        try:
                            item = source.pull()
                        except StopIteration:
                            active.remove(entry)
                            break
                        if _not_ready(item):
                            break
                        pulled += 1
                        got_any = True
                        yield item
                if active and not got_any:
                    yield NextValueNotReady()

        shared = SharedMetrics(parents=[s.shared_metrics for s in sources])
        return LocalIterator(build_union, shared,
                             name=f"LocalUnion[{', '.join(s.name for s in sources)}]")

    def __repr__(self) -> str:
        return self.name


def from_items(items: Iterable[Any], repeat: bool = False) -> LocalIterator:
    """A LocalIterator over `items` (again and again with `repeat`), for tests and small plans."""
    items = list(items)

    def gen(_timeout=None):
        while True:
            yield from items
            if not repeat:
                return

    return LocalIterator(gen, name=f"from_items[{len(items)}]")


def _name_of(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
