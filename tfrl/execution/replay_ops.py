"""Replay operators of execution plans (classic `ray.rllib.execution.replay_ops`), in the
execution layer: storing a plan's batches into a `LocalReplayBuffer` and replaying from it.

Combine the two with `Concurrently` (concurrency_ops.py): the store op pulls rollouts, the
replay op yields not-ready until the buffer reaches `learning_starts`.
"""
from __future__ import annotations

from typing import Any, List, Optional

from tfrl import errors
from tfrl.execution.local_iterator import LocalIterator, NextValueNotReady
from tfrl.execution.metrics_context import SharedMetrics
from tfrl.execution.replay_buffer import LocalReplayBuffer


def _only_local_buffer(local_buffer: Optional[LocalReplayBuffer], actors: Optional[List[Any]],
                       what: str) -> LocalReplayBuffer:
    if actors:
        raise errors.NotSupportedError(
            f"{what}: replay actors (classic ReplayActor shards) are not supported; pass "
            "local_buffer=LocalReplayBuffer(...), or use a trainer whose optimizer shards replay "
            "(Ape-X's replay_hosting shards)")
    if local_buffer is None:
        raise ValueError(f"{what} needs local_buffer=LocalReplayBuffer(...)")
    return local_buffer


class StoreToReplayBuffer:
    """For `.for_each()`: adds each batch to `local_buffer` and passes it on.

    Raises (constructor):
      ValueError: no local_buffer given.
      NotSupportedError: replay `actors` given (only a local buffer is supported).
    """

    def __init__(self, *, local_buffer: Optional[LocalReplayBuffer] = None,
                 actors: Optional[List[Any]] = None):
        self.local_actor = _only_local_buffer(local_buffer, actors, "StoreToReplayBuffer")

    def __call__(self, batch):
        self.local_actor.add_batch(batch)
        return batch


def Replay(*, local_buffer: Optional[LocalReplayBuffer] = None,
           actors: Optional[List[Any]] = None, num_async: int = 4) -> LocalIterator:
    """Batches replayed from `local_buffer`, endlessly; not-ready (nothing) while it holds
    fewer than its `learning_starts` env steps. `num_async` is accepted for classic code.

    Raises:
      ValueError: no local_buffer given.
      NotSupportedError: replay `actors` given (only a local buffer is supported).
    """
    buffer = _only_local_buffer(local_buffer, actors, "Replay")

    def replayed(_timeout=None):
        while True:
            item = buffer.replay()
            yield NextValueNotReady() if item is None else item

    return LocalIterator(replayed, SharedMetrics(), name="LocalReplay")
