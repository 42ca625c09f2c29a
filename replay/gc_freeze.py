"""The replay server's optional garbage-collection policy for a process it has to itself.

A table holds its items as Python objects (an item, its chunk, the chunk's column, ...): a
100k-item table keeps about 700k objects that Python's cyclic garbage collector walks at every
full collection, and a server that inserts tens of thousands of items per second triggers one
every second or two. Measured with tools/compare_reverb.py, those collections took half of the
server's CPU time at 400-byte items. Items and chunks never form reference cycles (reference
counting frees them), so walking them finds nothing.

`GcFreezer` moves every object alive to the collector's permanent generation (`gc.freeze()`,
which costs nothing) every `interval` seconds, so automatic collections only walk what was
created since. Cyclic garbage made of objects that were alive at a freeze is then found only by
a full pass, which runs every `full_every` seconds (`gc.unfreeze()`, `gc.collect()`,
`gc.freeze()`): memory held by such cycles is released up to that much later than with
Python's default policy.

The policy changes the collector of the whole process, so the server uses it only when asked
(`Server(freeze_gc=True)`, the default of the `replay-server` command, whose process is the
server's own).
"""
from __future__ import annotations

import asyncio
import gc
from typing import Optional

DEFAULT_INTERVAL_SECONDS = 1.0
DEFAULT_FULL_COLLECTION_SECONDS = 60.0


class GcFreezer:
    """Runs the policy on an asyncio event loop (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = DEFAULT_INTERVAL_SECONDS,
                 full_every: float = DEFAULT_FULL_COLLECTION_SECONDS):
        self._loop = loop
        self._interval = float(interval)
        self._full_every = float(full_every)
        self._next_full = loop.time() + self._full_every
        self._handle: Optional[asyncio.TimerHandle] = None
        self.freezes = 0
        self.full_collections = 0

    def start(self) -> None:
        """Starts the ticks (call on the loop's thread)."""
        self._handle = self._loop.call_later(self._interval, self._tick)

    def _tick(self) -> None:
        if self._loop.time() >= self._next_full:
            gc.unfreeze()
            gc.collect()
            self.full_collections += 1
            self._next_full = self._loop.time() + self._full_every
        gc.freeze()
        self.freezes += 1
        self._handle = self._loop.call_later(self._interval, self._tick)

    def stop(self) -> None:
        """Stops the ticks and gives the frozen objects back to the collector (call on the
        loop's thread)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        gc.unfreeze()
