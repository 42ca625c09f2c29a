"""A table's lock and its waits: who blocks on the rate limiter, who is woken, and when.

Part of `replay.table.Table` (a mixin; `Table` is the only class built on it). The table's one
lock guards everything the table holds; blocking inserts and samples wait on two condition
variables of that lock until the rate limiter lets them proceed, and callers that must not block
(the replay server's event loop) register change listeners instead and retry with the table's
`try_*` calls. Closing the table wakes every waiter with CancelledError.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable, List, Optional

from replay import errors


class TableWaiting:
    """The lock, the waiting and the waking of a `replay.table.Table`.

    Uses the table's `name`, `_items` and `_rate_limiter`; `_init_waiting` sets up the rest.
    """

    def _init_waiting(self) -> None:
        self._lock = threading.Lock()
        self._insert_cv = threading.Condition(self._lock)
        self._sample_cv = threading.Condition(self._lock)
        self._insert_waiters = 0
        self._sample_waiters = 0
        self._closed = False
        self._listeners: List[Callable[[str], None]] = []

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self):
        if self._closed:
            raise errors.CancelledError(f"table {self.name!r} is closed")

    @staticmethod
    def _deadline(timeout: Optional[float]) -> Optional[float]:
        if timeout is None:
            return None
        timeout = float(timeout)
        if math.isnan(timeout) or timeout < 0:
            raise errors.InvalidArgumentError(f"timeout must be None or a number >= 0 seconds, got {timeout}")
        return time.monotonic() + timeout

    def _wait_to_insert(self, deadline: Optional[float], timeout: Optional[float]) -> None:
        """Waits (lock held) until one insert may proceed."""
        self._wait_for_limiter("insert", self._rate_limiter.can_insert,
                               self._rate_limiter.insert_blocker, self._insert_cv, deadline, timeout)

    def _wait_to_sample(self, deadline: Optional[float], timeout: Optional[float]) -> None:
        """Waits (lock held) until one sample may proceed."""
        self._wait_for_limiter("sample", self._rate_limiter.can_sample,
                               self._rate_limiter.sample_blocker, self._sample_cv, deadline, timeout)

    def _wait_for_limiter(self, operation: str, allowed, blocker, condition, deadline, timeout) -> None:
        """Waits on `condition` until `allowed(size, 1)`; counts itself in `_<operation>_waiters`
        so the other side only notifies when someone waits."""
        waiters = f"_{operation}_waiters"
        while not allowed(len(self._items), 1):
            self._check_open()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise errors.DeadlineExceededError(
                    f"table {self.name!r}: {operation} timed out after {timeout:g} s: "
                    f"{blocker(len(self._items), 1)}")
            setattr(self, waiters, getattr(self, waiters) + 1)
            try:
                condition.wait(remaining)
            finally:
                setattr(self, waiters, getattr(self, waiters) - 1)
        self._check_open()

    def _wake_inserters(self):
        if self._insert_waiters:
            self._insert_cv.notify_all()
        for listener in self._listeners:
            listener("insert")

    def _wake_samplers(self):
        if self._sample_waiters:
            self._sample_cv.notify_all()
        for listener in self._listeners:
            listener("sample")

    def add_change_listener(self, listener: Callable[[str], None]) -> None:
        """Calls `listener("insert")` whenever a waiting insert may now proceed and
        `listener("sample")` whenever a waiting sample may (and both when the table closes).

        This is how waits that are not threads (the replay server's asynchronous calls, which use
        `try_insert_many` and `try_sample`) learn when to try again. The listener runs with the
        table's lock held, on whichever thread changed the table: it must return at once and
        must not call the table.
        """
        with self._lock:
            self._listeners = self._listeners + [listener]

    def remove_change_listener(self, listener: Callable[[str], None]) -> None:
        """Stops calling a listener given to `add_change_listener` (unknown ones are ignored)."""
        with self._lock:
            self._listeners = [x for x in self._listeners if x is not listener]

    # -- the rate limiter's answers now -----------------------------------------------------------

    def insert_blocker(self) -> str:
        """Why an insert waits now, with the rate limiter's numbers (for timeout messages)."""
        with self._lock:
            return self._rate_limiter.insert_blocker(len(self._items), 1)

    def can_sample(self, num_samples: int = 1) -> bool:
        """Whether the rate limiter would let `num_samples` samples proceed now (Reverb's name)."""
        with self._lock:
            return self._rate_limiter.can_sample(len(self._items), num_samples)

    def can_insert(self, num_inserts: int = 1) -> bool:
        """Whether the rate limiter would let `num_inserts` inserts proceed now (Reverb's name)."""
        with self._lock:
            return self._rate_limiter.can_insert(len(self._items), num_inserts)

    def sample_blocker(self) -> str:
        """Why a sample waits now, with the rate limiter's numbers (for timeout messages)."""
        with self._lock:
            return self._rate_limiter.sample_blocker(len(self._items), 1)
