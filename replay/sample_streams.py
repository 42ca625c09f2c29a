"""The dataset's sample streams: one SampleStream call per worker, read on its own thread and
decoded into blocks.

This sits between `replay.client` (which opens the stream and grants the server credit) and the
tf.data glue of `replay.dataset`: `BlockStream` is the generator one tf.data worker runs. Its
responses, many items each, are received on a reader thread (`Prefetcher`, so gRPC keeps
receiving while the worker decodes) and decoded by `replay.sample_blocks`. `Closer` ends every
stream of a dataset at once; `StreamMetrics` counts per server. No TensorFlow here.

A stream that breaks after delivering samples (for example a dropped connection) is reopened;
only a stream that fails before delivering any sample counts as the server's failure, which
ends the dataset, or with several servers only that server's streams.
See docs/architecture.md, "Data path" and "Processes and threads".
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tree

from replay import errors, sample_blocks, shared_ring
from replay.client import Client
from replay.replay_sample import ReplaySample
from replay.table_info import TableInfo

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ServerStreamStats:
    """Counters of the streams to one server."""

    samples: int = 0
    blocks: int = 0
    streams_opened: int = 0
    timeouts: int = 0
    failures: int = 0
    last_error: Optional[str] = None


class StreamMetrics:
    """Thread-safe counters of a dataset's streams, per server address."""

    def __init__(self):
        self._lock = threading.Lock()
        self._servers: Dict[str, ServerStreamStats] = {}

    def _stats(self, address: str) -> ServerStreamStats:
        stats = self._servers.get(address)
        if stats is None:
            stats = self._servers[address] = ServerStreamStats()
        return stats

    def record_block(self, address: str, num_samples: int) -> None:
        with self._lock:
            stats = self._stats(address)
            stats.samples += num_samples
            stats.blocks += 1

    def record_stream(self, address: str) -> None:
        with self._lock:
            self._stats(address).streams_opened += 1

    def record_timeout(self, address: str) -> None:
        with self._lock:
            self._stats(address).timeouts += 1

    def record_failure(self, address: str, error: BaseException) -> None:
        with self._lock:
            stats = self._stats(address)
            stats.failures += 1
            stats.last_error = f"{type(error).__name__}: {error}"

    def snapshot(self) -> Dict[str, ServerStreamStats]:
        """A copy of the counters, address -> ServerStreamStats."""
        with self._lock:
            return {a: dataclasses.replace(s) for a, s in self._servers.items()}

    @property
    def failed_servers(self) -> List[str]:
        with self._lock:
            return sorted(a for a, s in self._servers.items() if s.failures)

    @property
    def total_samples(self) -> int:
        with self._lock:
            return sum(s.samples for s in self._servers.values())


# While no response comes, a stream hands tf.data an empty block this often, so the generator
# returns to TensorFlow, which can then cancel the read (a TF1 session closed while a
# `get_next` waits on an empty table); a generator blocked in Python could never be cancelled.
IDLE_TICK_S = 0.25


class Prefetcher:
    """Iterates a response stream on its own thread, up to `depth` responses ahead of the
    consumer, so gRPC keeps receiving (and the server keeps sending: HTTP/2 flow control only
    lets it run ahead of reads by a window) while the consumer decodes. Stop it with `stop()`
    and end the stream itself (closing the client cancels its calls)."""

    def __init__(self, responses, depth: int = 2, closed: Optional[threading.Event] = None):
        self._queue: "queue.Queue" = queue.Queue(depth)
        self._stopped = threading.Event()
        # The dataset's owner closed it (`ReplayDataset.close`): stop waiting for responses, which a
        # server that keeps running (and a table that stays empty) may never send.
        self._closed = closed if closed is not None else threading.Event()
        self._thread = threading.Thread(target=self._run, args=(responses,), daemon=True,
                                        name="replay-dataset-reader")
        self._thread.start()

    def _run(self, responses) -> None:
        try:
            for response in responses:
                if not self._put((response, None)):
                    return
            self._put((None, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which raises it
            self._put((None, e))

    def _put(self, entry) -> bool:
        # A closed dataset's iterator may never be read again (its owner keeps it, or tf.data does),
        # so nothing would take from a full queue: stop then too, ending the thread and its stream.
        while not (self._stopped.is_set() or self._closed.is_set()):
            try:
                self._queue.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self):
        """The responses; while none comes, None every `IDLE_TICK_S` (see `BlockStream`)."""
        idle = 0.0
        while True:
            try:
                response, error = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._closed.is_set():
                    return
                idle += 0.1
                if idle >= IDLE_TICK_S:
                    idle = 0.0
                    yield None
                continue
            idle = 0.0
            if error is not None:
                raise error
            if response is None:
                return
            yield response

    def stop(self) -> None:
        self._stopped.set()


class Closer:
    """Closes a dataset: sets `event` and closes the clients of its open streams, so a stream
    waiting on the server (an empty table, a rate limiter) ends now instead of holding
    tf.data's iterator, and so the process, until more samples arrive."""

    def __init__(self):
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._clients: set = set()

    def register(self, client) -> bool:
        """Tracks `client` until `unregister`; False (and nothing tracked) once closed."""
        with self._lock:
            if self.event.is_set():
                return False
            self._clients.add(client)
            return True

    def unregister(self, client) -> None:
        with self._lock:
            self._clients.discard(client)

    def __call__(self) -> None:
        with self._lock:
            self.event.set()
            clients, self._clients = list(self._clients), set()
        for client in clients:
            client.close()



class BlockStream:
    """The generator behind one worker: yields blocks of many items (or of their steps, given
    `step_ranks`) as one ReplaySample of [N, ...] arrays in the dataset's structure.

    Args:
      address, table: where to sample.
      flat_dtypes: the numpy dtype of each flattened column.
      max_in_flight: samples requested ahead of consumption (the stream's credit).
      larger_in_flight: a larger credit to use instead when sampling the table removes no item
        (its max_times_sampled is 0): the budget of several workers on one stream. A reader of
        a queue keeps `max_in_flight`, so it takes no more items out of the queue than asked.
      max_samples_per_stream: samples after which a new stream opens; -1 keeps one.
      rate_limiter_timeout_ms: -1 waits forever; >= 0 ends the generator (no error) when no
        sample comes within that many milliseconds.
      tolerate_failure: a server that fails ends this generator quietly (logged and counted in
        `metrics`) instead of raising.
      metrics: the counters to record into.
      structure: the nest the flattened columns are unflattened into.
      closer: the dataset's `Closer`.
      columnar: ask the server for columnar responses (small items of fixed shapes).
      client_options: keyword arguments of the stream's `Client`.
      max_samples: -1, or the samples all streams of one call of this generator deliver at most.
      check_signature: called with the table's `TableInfo` (None when the server cannot tell)
        as the stream opens; its `check_steps(columns)` with each block's columns.
      item_shapes: each column's item shape (a tuple with None for unknown sizes, or None for
        an unknown rank), for the empty blocks handed on while no response comes.
      step_ranks: given, each block is split into the steps of its items
        (`sample_blocks.split_steps`).
      shared_memory: offer the server a shared-memory ring (`replay.shared_ring`), which a
        server on this host uses instead of sending the items' bytes over gRPC.
    """

    def __init__(self, address: str, table: str, flat_dtypes: List[np.dtype], max_in_flight: int,
                 max_samples_per_stream: int, rate_limiter_timeout_ms: int, tolerate_failure: bool,
                 metrics: StreamMetrics, structure: Any = None,
                 closer: Optional[Closer] = None, columnar: bool = False,
                 client_options: Optional[Dict[str, Any]] = None, max_samples: int = -1,
                 check_signature: Optional[Callable[[Optional[TableInfo]], None]] = None,
                 item_shapes: Optional[Sequence[Optional[tuple]]] = None,
                 step_ranks: Optional[Sequence[Optional[int]]] = None,
                 larger_in_flight: Optional[int] = None, shared_memory: bool = False):
        self.address = address
        self.check_signature = check_signature
        self.max_samples = max_samples
        self.client_options = dict(client_options or {})
        self.columnar = columnar
        self.closer = closer if closer is not None else Closer()
        self.closed = self.closer.event
        self.structure = structure if structure is not None else [None] * len(flat_dtypes)
        self.table = table
        self.flat_dtypes = flat_dtypes
        self.max_in_flight = max_in_flight
        self.larger_in_flight = larger_in_flight
        self.max_samples_per_stream = max_samples_per_stream
        self.rate_limiter_timeout_ms = rate_limiter_timeout_ms
        self.tolerate_failure = tolerate_failure
        self.metrics = metrics
        self.step_ranks = None if step_ranks is None else list(step_ranks)
        self.shared_memory = shared_memory
        shapes = list(item_shapes or [None] * len(flat_dtypes))
        self.item_bytes = (sum(int(np.prod(s, dtype=np.int64)) * d.itemsize for s, d in zip(shapes, flat_dtypes))
                           if step_ranks is None and all(s is not None and None not in s for s in shapes)
                           else None)
        # A block of no samples, handed on while no response comes: tf.data passes it on as
        # nothing (`unbatch`, `rebatch`).
        info, columns = sample_blocks.empty_block(item_shapes or [None] * len(flat_dtypes), flat_dtypes)
        self.empty_block = ReplaySample(info, tree.unflatten_as(self.structure, columns))

    def _table_info(self, client: Client) -> Optional[TableInfo]:
        """The table's info, or None when the server cannot be asked or has no such table (the
        stream then reports it)."""
        if self.check_signature is None and self.larger_in_flight is None:
            return None
        try:
            return client.server_info().get(self.table)
        except errors.ReplayError:
            return None

    def _blocks(self, packed, pool: sample_blocks.BlockPool):
        """The blocks of one response: one, or one per item on the general path. A response
        that came through the shared-memory ring is released as soon as it is decoded (the
        blocks hold copies)."""
        try:
            block = sample_blocks.decode_block(packed, self.flat_dtypes, pool)
            blocks = [block] if block is not None else list(
                sample_blocks.decode_items_one_by_one(packed, self.flat_dtypes))
        finally:
            if packed.release is not None:
                packed.release()
        yield from blocks

    def __call__(self):
        client = Client(self.address, **self.client_options)
        prefetcher = None
        pool = sample_blocks.BlockPool()
        if not self.closer.register(client):
            return
        check_steps = getattr(self.check_signature, "check_steps", None)
        structure, step_ranks = self.structure, self.step_ranks
        try:
            table_info = self._table_info(client)
            if self.check_signature is not None:
                self.check_signature(table_info)
            in_flight = self.max_in_flight
            if (self.larger_in_flight is not None and table_info is not None
                    and table_info.max_times_sampled == 0):
                in_flight = max(in_flight, self.larger_in_flight)
            total = 0  # samples of all this call's streams: never more than max_samples
            while not self.closed.is_set():
                self.metrics.record_stream(self.address)
                received = 0
                stream_samples = self.max_samples_per_stream
                if self.max_samples >= 0:
                    left = self.max_samples - total
                    if left <= 0:
                        return
                    stream_samples = left if stream_samples < 0 else min(stream_samples, left)
                try:
                    ring_bytes = (shared_ring.stream_ring_bytes(in_flight, self.item_bytes)
                                  if self.shared_memory else 0)
                    prefetcher = Prefetcher(client.sample_responses(
                        self.table, in_flight, self.rate_limiter_timeout_ms,
                        stream_samples, columnar=self.columnar, ring_bytes=ring_bytes),
                        closed=self.closed)
                    for response in prefetcher:
                        if response is None:
                            yield self.empty_block
                            continue
                        count = len(response.response.probabilities)
                        received += count
                        total += count
                        self.metrics.record_block(self.address, count)
                        for info, columns in self._blocks(response, pool):
                            if check_steps is not None:
                                check_steps(columns)
                            if step_ranks is not None:
                                info, columns = sample_blocks.split_steps((info, columns), step_ranks)
                            yield ReplaySample(info, tree.unflatten_as(structure, columns))
                except errors.DeadlineExceededError:
                    # Reverb's contract: no sample within the rate-limiter timeout ends the dataset.
                    self.metrics.record_timeout(self.address)
                    return
                except (errors.UnavailableError, errors.CancelledError) as e:
                    if self.closed.is_set():
                        return  # the owner closed the dataset; the server may be gone already
                    if received:
                        # It worked until now (e.g. a dropped connection): reopen; a stream that
                        # fails before delivering anything counts as the server's failure.
                        log.info("replay dataset: the stream from %s broke (%s); reopening it", self.address, e)
                        continue
                    self.metrics.record_failure(self.address, e)
                    if not self.tolerate_failure:
                        raise
                    log.warning("replay dataset: the stream from %s failed (%s); reading on from "
                                "the other servers", self.address, e)
                    return
                if stream_samples < 0 or received < stream_samples:
                    return  # the server closed the stream
                # max_samples_per_stream reached: open a new stream, as Reverb does.
        finally:
            self.closer.unregister(client)
            if prefetcher is not None:
                prefetcher.stop()
            client.close()
