"""Concurrency operators of execution plans (classic `ray.rllib.execution.concurrency_ops`), in
the execution layer: running several sub-flows of one plan side by side.

Everything runs in the driver's one thread: "round_robin" and "async" both interleave the ops
in a fixed round-robin order (see local_iterator.py), and an op that has nothing ready is
skipped for that round. Enqueue/Dequeue hand items between ops through a queue.Queue.
"""
from __future__ import annotations

import queue
from typing import Callable, List, Optional

from tfrl.execution.local_iterator import LocalIterator, NextValueNotReady
from tfrl.execution.metrics_context import SharedMetrics

CONCURRENCY_MODES = ("round_robin", "async")


def Concurrently(ops: List[LocalIterator], *, mode: str = "round_robin",
                 output_indexes: Optional[List[int]] = None,
                 round_robin_weights: Optional[List] = None) -> LocalIterator:
    """The ops' items interleaved (see module doc); with `output_indexes`, only the items of
    those ops (the others are still pulled, for their side effects). `round_robin_weights`
    (round_robin mode): items to pull from each op per round, "*" for as many as it has ready.

    Raises:
      ValueError: fewer than 2 ops, an unknown mode, weights in async mode or all "*", an
        output index out of range.
    """
    if len(ops) < 2:
        raise ValueError("Concurrently needs at least 2 ops")
    if mode not in CONCURRENCY_MODES:
        raise ValueError(f"mode must be one of {', '.join(CONCURRENCY_MODES)}; got {mode!r}")
    if mode == "async" and round_robin_weights:
        raise ValueError("round_robin_weights cannot be given in async mode")
    if round_robin_weights and all(w == "*" for w in round_robin_weights):
        raise ValueError("round_robin_weights cannot all be '*'")
    if output_indexes:
        for i in output_indexes:
            if i not in range(len(ops)):
                raise ValueError(f"output index {i} is out of range for {len(ops)} ops")
        ops = [op.for_each(_Tag(i)) for i, op in enumerate(ops)]
    output = ops[0].union(*ops[1:], deterministic=mode == "round_robin",
                          round_robin_weights=round_robin_weights)
    if output_indexes:
        wanted = set(output_indexes)
        output = output.filter(lambda tagged: tagged[0] in wanted).for_each(lambda tagged: tagged[1])
    return output


class _Tag:
    """Marks an op's items with its index."""

    def __init__(self, index: int):
        self.index = index
        self.__name__ = f"tag{index}"

    def __call__(self, item):
        return self.index, item


class Enqueue:
    """For `.for_each()`: puts each item into `output_queue` without waiting and passes it on;
    not-ready when the queue is full.

    Raises (constructor):
      ValueError: output_queue is not a queue.Queue.
    """

    def __init__(self, output_queue: queue.Queue):
        if not isinstance(output_queue, queue.Queue):
            raise ValueError(f"expected a queue.Queue, got {type(output_queue).__name__}")
        self.queue = output_queue

    def __call__(self, item):
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            return NextValueNotReady()
        return item


def Dequeue(input_queue: queue.Queue, check: Callable[[], bool] = lambda: True) -> LocalIterator:
    """The items of `input_queue`, not-ready while it is empty.

    Raises:
      ValueError: input_queue is not a queue.Queue.
      RuntimeError (when pulled): `check()` returned False.
    """
    if not isinstance(input_queue, queue.Queue):
        raise ValueError(f"expected a queue.Queue, got {type(input_queue).__name__}")

    def items(_timeout=None):
        while check():
            try:
                yield input_queue.get_nowait()
            except queue.Empty:
                yield NextValueNotReady()
        raise RuntimeError("Dequeue: its liveness check failed")

    return LocalIterator(items, SharedMetrics(), name="Dequeue")
