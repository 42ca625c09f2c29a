"""PrioritySender: the thread that carries a learner's priority updates to the replay shards.

Ape-X's learner (tfrl/optimizers/async_replay_optimizer.py) computes |TD error| + eps for every
sampled item; the sender makes the `mutate_priorities` calls from a thread of its own, so the
learner never waits for a round trip.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Optional


class PrioritySender:
    """Sends the learner's priority updates to their shards from a thread of its own, so the
    learner thread does not wait for the round trips (sampling, transfer and learning stay
    pipelined, as in the paper). Updates that pile up while a call is on the wire are merged
    per shard: a key sampled again keeps its latest priority, and each shard gets one call.

    `send(shard, {key: priority})` makes one shard's call; the first error it raises is
    raised by the next `put` or `flush` (so a lost shard fails the learner, which fails over).
    """

    def __init__(self, send: Callable[[int, Dict[int, float]], None]):
        self._send = send
        self._changed = threading.Condition()
        self._pending: Dict[int, Dict[int, float]] = {}
        self._sending = False
        self._error: Optional[BaseException] = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="apex-priorities", daemon=True)
        self._thread.start()

    def put(self, updates: Dict[int, Dict[int, float]]) -> None:
        """Queues {shard: {key: priority}}.

        Raises:
          The error an earlier send failed with (once).
        """
        with self._changed:
            self._raise_error()
            for shard, shard_updates in updates.items():
                self._pending.setdefault(shard, {}).update(shard_updates)
            self._changed.notify_all()

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Waits until everything queued has been sent; False if `timeout` passed first.

        Raises:
          The error a send failed with (once).
        """
        with self._changed:
            done = self._changed.wait_for(
                lambda: not (self._pending or self._sending) or self._error is not None
                or self._closed, timeout)
            self._raise_error()
            return done

    def close(self, timeout: float = 10.0) -> None:
        """Stops the thread after the call on the wire; what is still queued is dropped (the
        learner is stopping, and its shards may be gone)."""
        with self._changed:
            self._closed = True
            self._pending = {}
            self._changed.notify_all()
        self._thread.join(timeout)

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
                batch, self._pending = self._pending, {}
                self._sending = True
            try:
                for shard, shard_updates in batch.items():
                    self._send(shard, shard_updates)
            except Exception as exc:  # noqa: BLE001 - raised in the learner thread by put()
                with self._changed:
                    self._error = exc
            finally:
                with self._changed:
                    self._sending = False
                    self._changed.notify_all()
