"""How the replay server shares its event loop between calls: the change signals a waiting call
awaits (`TableSignals`), the queue that runs the streams' steps of work in short slices
(`WorkQueue`), a stream's turn among the active insert streams (`Turn`), and the line of insert
streams waiting for one table's rate limiter (`InsertLine`).

Part of the replay server (replay/server.py); everything here lives on its event loop's thread,
except `TableSignals.on_change`, which any thread that changes a table may call.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time

# A waiting call is woken by its table's change signal; it also looks again this often, so a
# wake-up lost to a race costs at most this long.
RECHECK_SECONDS = 1.0
# The streams' steps of work (store and insert one message, take and encode one sample
# response) run in arrival order from one queue, for at most this long per turn of the event
# loop; then the loop serves everything else (new calls, server_info) before the next slice.
WORK_SLICE_SECONDS = 0.001


class TableSignals:
    """Wakes the calls waiting on one table when it may let them proceed.

    Registered as the table's change listener; the events live on the server's event loop, and a
    change made on another thread (an in-process caller, `Server.stop`) is handed over to it.
    A call takes the current event (`take`) before an attempt that the table may refuse, and
    waits on it after a refusal: a change between the two (another coroutine's insert while the
    attempt's result comes back) has already set the event, so no wake-up is lost. Changes
    nobody took the event of cost nothing.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self.events = {"insert": asyncio.Event(), "sample": asyncio.Event()}
        self._taken = {"insert": False, "sample": False}

    def take(self, kind: str) -> asyncio.Event:
        """The event the next change of `kind` sets."""
        self._taken[kind] = True
        return self.events[kind]

    def on_change(self, kind: str) -> None:
        if threading.get_ident() == self._loop_thread:
            if self._taken[kind]:
                self._fire(kind)
        else:
            try:
                self._loop.call_soon_threadsafe(self._fire, kind)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    def _fire(self, kind: str) -> None:
        event = self.events[kind]
        self.events[kind] = asyncio.Event()
        self._taken[kind] = False
        event.set()

    @staticmethod
    async def wait(event: asyncio.Event, timeout: float) -> None:
        """Waits until `event` (from `take` before the refused attempt) fires, or `timeout`
        seconds."""
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass


class WorkQueue:
    """Runs the streams' steps of work fairly and in bounded slices of the event loop.

    Without it, a burst of messages on hundreds of streams makes one turn of the loop run all
    of their steps back to back (hundreds of milliseconds), and a new call or a `server_info`
    waits for all of them. Here a step is queued; one worker coroutine runs queued steps for
    at most WORK_SLICE_SECONDS, then yields the loop. A step whose caller was cancelled
    before it ran is dropped, so a cancelled call does no further work.
    """

    def __init__(self):
        self._queue: "collections.deque" = collections.deque()
        self._ready = asyncio.Event()
        self._worker = asyncio.get_running_loop().create_task(self._work())

    async def run(self, step, *args):
        """`step(*args)` (a plain function), run by the worker; its result or exception."""
        future = asyncio.get_running_loop().create_future()
        self._queue.append((future, step, args))
        self._ready.set()
        return await future

    async def _work(self) -> None:
        queue = self._queue
        while True:
            if not queue:
                self._ready.clear()
                await self._ready.wait()
            started = time.perf_counter()
            while queue and time.perf_counter() - started < WORK_SLICE_SECONDS:
                future, step, args = queue.popleft()
                if future.done():  # its call was cancelled
                    continue
                try:
                    future.set_result(step(*args))
                except BaseException as e:  # noqa: BLE001 - handed to the waiting call
                    future.set_exception(e)
                # not held while the worker waits: the last insert message's chunks would live on
                future = step = args = None
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._worker.cancel()


class Turn:
    """One stream's hold on a semaphore of turns, given back at most once."""

    def __init__(self, turns: asyncio.Semaphore):
        self._turns = turns
        self.held = False

    async def take(self) -> None:
        await self._turns.acquire()
        self.held = True

    def give_up(self) -> None:
        if self.held:
            self.held = False
            self._turns.release()


class InsertLine:
    """The insert streams whose messages wait for one table's rate limiter, served in arrival
    order.

    Only the stream at the head tries the table when it changes; once its items are all in, it
    hands the head on at once (the limiter may admit more). So a change wakes one stream rather
    than every waiting one (hundreds of blocked writers would otherwise each queue a step of work
    per sample), and no stream, nor a new message (see `_insert_now`), takes the room an earlier
    one waits for: a writer's wait is bounded by what waits ahead of it.
    """

    def __init__(self):
        self.waiting: "collections.deque[asyncio.Event]" = collections.deque()

    def join(self) -> asyncio.Event:
        """A place at the end of the line: an event set when it is the head."""
        turn = asyncio.Event()
        if not self.waiting:
            turn.set()
        self.waiting.append(turn)
        return turn

    def leave(self, turn: asyncio.Event) -> None:
        """Gives the place up (done, failed or cancelled); the next in line becomes the head."""
        was_head = self.waiting[0] is turn
        self.waiting.remove(turn)
        if was_head and self.waiting:
            self.waiting[0].set()
