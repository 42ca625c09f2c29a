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

Freezing alone still left the collector's automatic full collections: once objects are frozen
the collector counts few long-lived ones, so a full collection ran after every ten
middle-generation ones (every 0.2-0.3 s at 65k inserts/s), walking everything made since the
last freeze; 18-22 of them in 5 s took 0.7-0.9 s of the server's 4 s of CPU (400-byte inserts,
`gc.callbacks` timing in the server process). While the policy runs, the collector's thresholds
are `_THRESHOLDS`: no automatic full collection (the periodic full pass is the only one) and
young collections every 5,000 allocations, so what survives them is walked about once before it
is frozen. Those young collections still find the short-lived cycles of the event loop and
gRPC's calls; cycles that outlive them wait for the full pass.

Young collections still walked every object of every inserted item once before the next
freeze. So the server runs each insert message through `GcFreezer.freezing`: a young collection
of what the process made since the last freeze (the event loop's and other calls' short-lived
objects, which the automatic young collections would have collected), then the message, then a
freeze of what it left alive, which is the new items and chunks: they are not walked until the
next full pass. With four writers of 400-byte items that took the server from 5.4-5.6 to
5.2-5.3 us of CPU per item and 119-126k to 127-128k items/s, alternating, three runs each.
Cyclic garbage that another thread makes while a message is inserted is frozen with it and
waits for the full pass; the server's own threads make little (its inserts and samples run on
its event loop).

The policy changes the collector of the whole process: cyclic garbage that other code of the
process makes may wait up to a full pass (a minute) to be freed, and the collector runs no
automatic full collection while a server runs. Since it is how a server inserts fast, a server
runs it by default (`DEFAULT_FREEZE_GC`; the `replay-server` command too), as it keeps freed heap
memory by default (`replay.heap_policy`); `Server(freeze_gc=False)` leaves the collector alone,
for a process whose other work makes much cyclic garbage (tfrl's trainer does so for the server
it embeds in its driver). The thresholds in force before the first server started come back
when the last one stops.
"""
from __future__ import annotations

import asyncio
import gc
import threading
from typing import Optional

DEFAULT_FREEZE_GC = True
"""Whether a `Server` runs the policy unless told otherwise."""
DEFAULT_INTERVAL_SECONDS = 1.0
DEFAULT_FULL_COLLECTION_SECONDS = 60.0
# gc.set_threshold's (young, middle, full) while a freezer runs: the third is so high that only
# the full pass collects the oldest generation (see the module docstring).
_THRESHOLDS = (5000, 1000, 1_000_000)
# Thresholds of the process before its first running freezer, restored when the last one stops.
_saved_thresholds: Optional[tuple] = None
_running = 0
_lock = threading.Lock()  # servers run their loops on threads of their own


class GcFreezer:
    """Runs the policy on an asyncio event loop (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = DEFAULT_INTERVAL_SECONDS,
                 full_every: float = DEFAULT_FULL_COLLECTION_SECONDS):
        self._loop = loop
        self._interval = float(interval)
        self._full_every = float(full_every)
        self._next_full = loop.time() + self._full_every
        self._handle: Optional[asyncio.TimerHandle] = None
        self.freezes = 0  # by the ticks
        self.step_freezes = 0  # after steps run through `freezing`
        self.full_collections = 0

    def start(self) -> None:
        """Starts the ticks and sets the collector's thresholds (call on the loop's thread)."""
        global _saved_thresholds, _running
        with _lock:
            if _running == 0:
                _saved_thresholds = gc.get_threshold()
                gc.set_threshold(*_THRESHOLDS)
            _running += 1
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

    def freezing(self, step, *args):
        """Returns `step(*args)`, run between a young collection and a freeze, so that what
        `step` leaves alive is frozen without being walked (see the module docstring). For
        steps that make long-lived objects; call on the loop's thread."""
        gc.collect(0)
        try:
            return step(*args)
        finally:
            gc.freeze()
            self.step_freezes += 1

    def stop(self) -> None:
        """Stops the ticks, gives the frozen objects back to the collector and, when no other
        freezer runs, the process its thresholds (call on the loop's thread)."""
        global _running
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            with _lock:
                _running -= 1
                if _running == 0:
                    gc.set_threshold(*_saved_thresholds)
        gc.unfreeze()
