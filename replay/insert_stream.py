"""InsertStream: one InsertStream call of a writer, with batching and flow control.

Each `TrajectoryWriter` (and so each `Writer`, and `Client.insert`) sends its chunks, items and
chunk releases through one `InsertStream`: a queue of messages that gRPC's request iterator
drains (framed by `replay.framing`, so chunk bytes are not copied into the message), while a
reader thread counts the server's batched acks. If the call fails (bad item, server gone), the
next call raises the error.

Flow control: a caller blocks while the unacknowledged items exceed the stream's window or
their chunk bytes exceed _MAX_IN_FLIGHT_BYTES, so a writer never holds more than that much
unacknowledged data. The window adapts, between a few items and `max_in_flight_items`: it
starts at _START_WINDOW_ITEMS and doubles with each message acknowledged without waiting, so
an unhindered writer soon keeps its whole budget in flight (what small steps need for speed);
when the server reports that a message waits for a table's rate limiter (an InsertResponse
without keys), it drops to _RATE_LIMITED_WINDOW_ITEMS. A writer that a rate limiter holds back
so stays only a few items ahead of what the limiter admits, however large its budget, and its
`flush` returns soon after the limiter reopens.

A writer on the server's host whose chunks are large sends their bytes through a shared-memory
ring instead of the message (`replay.shared_ring`; the message says where they are): the kernel's
and gRPC's copies on both sides become one copy into the ring and one out of it (one writer of
40 kB steps: 70-80% more items/s; 400 kB: about 40%).

A writer that checks its items against the tables' signatures reads them from the stream
(`table_infos`): the call asks for them in its metadata and the server's first response carries
them, so hundreds of writers starting at once do not each queue a ServerInfo call (which the
server takes up one at a time) ahead of the calls of everyone else who asks the server. Only a
call that `table_infos` starts asks: describing every table costs the server time in proportion
to their number, and a writer that does not check its items (`Client.insert`'s), or whose
client already knows the tables, would pay it at every stream start (300 one-item inserts to a
server of 300 tables: 6.4 s when every call asked, against 1.1 s to a server of 2).

What is queued is already packed: `send` appends each chunk's and item's fields to the lists of
the message being filled (`codec.ChunkBatchBuilder`, `codec.ItemBatchBuilder`). Queued
chunks and items used to wait as objects (a chunk, its columns, an item's column tuples, the
queue's entries), about ten per item that survived the garbage collector's young collections
and so were walked again by its older ones; for 400-byte steps those collections took a fifth
of a writer's CPU time.
"""
from __future__ import annotations

import collections
import sys
import threading
import time
from typing import Deque, List, Optional, Sequence, Union

import grpc

from replay import codec, errors, exit_safety, framing, protocol, rpc_errors, server_replies, shared_ring
from replay.chunks import Chunk
from replay.proto import replay_pb2

_MAX_BATCH_BYTES = 4 * 1024 * 1024
_MAX_BATCH_ITEMS = 2048
# A message takes at most this share of the writer's item budget, so that several messages are in
# flight at once: the server inserts one while the writer fills the next. A budget of one message
# serialises the two (4 kB steps with 1,024 items in flight and 1,024-item messages: 35k items/s
# from one writer; 1,024 items in four messages: 44k).
_MESSAGES_PER_WINDOW = 4
# ... but not below this many items (or the whole budget, where that is smaller): a message costs
# both sides a fixed overhead, which a small budget split four ways pays per few items (the legacy
# Writer's 25 items in flight, as 6-item messages: 40-55% fewer items/s than as whole ones).
_MIN_BATCH_ITEMS = 64
# Four writers of 400-byte steps into one server: 256 gave messages of about 250 items and
# 102-108k items/s; 1024 gave about 480 (the linger ends them first) and 111-113k items/s.
_TARGET_BATCH_ITEMS = 1024
_LINGER_SECONDS = 0.002
# ... except while the server has yet to take up this many full messages already sent: a
# partial message would only wait behind them, so the iterator fills it (up to
# _BUSY_LINGER_SECONDS, or until the acks show the server caught up). Sixteen writers of 100 B
# steps on two cores: messages of 660-690 items instead of 270, 62-64k items/s before, 77k after.
_BUSY_BACKLOG_MESSAGES = 2
_BUSY_LINGER_SECONDS = 0.05
# Bytes a message needs on top of its chunk data (headers, keys, shapes), for the size check.
_MESSAGE_OVERHEAD_BYTES = 64 * 1024
# The flow-control window (see the module docstring). A writer starts with few items in flight
# (a rate limiter that blocks inserts from the start holds back that many per writer before the
# first report of waiting arrives), doubles its window per message that went in without waiting,
# and falls back to _RATE_LIMITED_WINDOW_ITEMS at each report. Chunk bytes are bounded apart from
# items: items that reference many steps each carry many bytes. 16 MB is four full messages, so
# large steps keep as many messages in flight as small ones.
_START_WINDOW_ITEMS = 256
_RATE_LIMITED_WINDOW_ITEMS = 32
_MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024
# A writer whose first chunks hold at least this many bytes each on average offers the server
# a shared-memory ring (`replay.shared_ring`) of one and a half times the bytes it may keep
# unacked (its item budget in chunks like the first, at most _MAX_IN_FLIGHT_BYTES) and two
# messages more, so a message finds room unless acks lag (a placement takes at most half a
# ring). Below it the bytes are few next to the per-message work (one
# writer of 4 kB steps: 8% fewer server CPU seconds per item with the ring; 40 kB: 28%).
_MIN_RING_CHUNK_BYTES = 2048


class _Message:
    """One InsertRequest being filled: packed chunks, then items, then chunk releases (the
    order in which the server applies them)."""

    __slots__ = ("chunks", "items", "releases")

    def __init__(self):
        self.chunks = codec.ChunkBatchBuilder()
        self.items = codec.ItemBatchBuilder()
        self.releases: List[int] = []

    def __bool__(self) -> bool:
        return bool(len(self.chunks) or len(self.items) or self.releases)

    def request(self) -> framing.PackedInsertRequest:
        request = replay_pb2.InsertRequest()
        column_data: List[bytes] = []
        self.chunks.write_to(request.chunks, column_data)
        self.items.write_to(request.items)
        if self.releases:
            request.release_chunk_keys.extend(self.releases)
        return framing.PackedInsertRequest(request, column_data)


class InsertStream:
    """One InsertStream call: an ordered queue of packed messages of chunks, items and chunk
    releases, drained by gRPC's request iterator, with the server's acks counted by a reader
    thread. A message takes up to _MAX_BATCH_BYTES of chunk data and _MAX_BATCH_ITEMS items, or a
    _MESSAGES_PER_WINDOW-th of `max_in_flight_items` where that is fewer.

    Batching: when the queue holds fewer than _TARGET_BATCH_ITEMS items (or a message's worth, where
    that is fewer), the request iterator lingers up to _LINGER_SECONDS for more (unless a flush or
    close wants everything out now), so a busy writer sends few large messages and a quiet one
    adds at most that latency.

    Flow control (see the module docstring): `send` blocks while more than the window's items
    (at most `max_in_flight_items`) or more than _MAX_IN_FLIGHT_BYTES of chunk bytes are
    unacknowledged. Each message with items gets one ack from the server, in order, so the
    bytes a message carried are counted off with its ack.

    Writers own one each; programs write through a writer, not through this class.
    """

    def __init__(self, client, max_in_flight_items: int, timeout: Optional[float] = None):
        self._client = client
        # the client's setting (`Client(shared_memory=)`); a writer built around anything
        # client-like offers the ring
        self._shared_memory = getattr(client, "shared_memory", shared_ring.DEFAULT_SHARED_MEMORY)
        # The writer's ring, when it offered one (see `_offer_ring`); the server said it opened
        # it; each sent message with items, the ring total its ack gives back (in order).
        self._ring: Optional[shared_ring.ClientRing] = None
        self._ring_considered = False  # at the first send with chunks
        self._ring_to_name = False  # the next message names the ring
        self._ring_opened = False
        self._ring_marks: Deque[int] = collections.deque()
        self._ring_mark = 0
        self._ring_messages = 0
        self._max_in_flight = int(max_in_flight_items)
        self._timeout = timeout  # the call's gRPC deadline, in seconds from its start
        # `with self._lock` where a condition's lock is wanted: Condition.__enter__ is a Python
        # call around it, and `send` takes the lock once per item
        lock = self._lock = threading.Lock()
        self._data_ready = threading.Condition(lock)  # the request iterator waits on it
        self._acked = threading.Condition(lock)  # callers waiting for acks wait on it
        self._full: Deque[_Message] = collections.deque()  # messages that reached a limit
        self._filling = _Message()  # the message send() appends to
        self._queued_items = 0
        self._iterator_waiting = False
        self._urgent = False  # a flush or close wants the queue sent without lingering
        self._unacked = 0
        self._window = min(_START_WINDOW_ITEMS, self._max_in_flight)
        self._batch_items = _batch_items(self._max_in_flight)
        self._unacked_bytes = 0  # chunk bytes queued or sent whose items are not acked yet
        # chunk bytes of each sent message with items, in order, counted off with its ack; a
        # message of chunks alone hands its bytes on to the next one with items
        self._sent_bytes: Deque[int] = collections.deque()
        self._bytes_without_items = 0
        self._message_waited = False  # the server reported the oldest unacked message waiting
        # for the timeout message of `wait`: what went out, what came back, and when
        self._messages_sent = 0
        self._acks_received = 0
        self._waiting_reports = 0
        self._last_ack_time: Optional[float] = None
        self._error: Optional[errors.ReplayError] = None
        self._closing = False
        self._call = None
        # (looked up now: at interpreter exit module globals may already be gone)
        self._keep_if_finalizing = exit_safety.keep_if_finalizing
        self._calls_made = 0  # a request iterator ends once its call is not the current one
        self._reader: Optional[threading.Thread] = None
        # the server's tables as the first response described them (`table_infos`)
        self._tables: Optional[dict] = None
        self._call_describes_tables = False  # the current call asked the server for its tables
        self._max_chunk_bytes = client.max_message_bytes - _MESSAGE_OVERHEAD_BYTES

    @property
    def max_in_flight_items(self) -> int:
        """Unacknowledged items beyond which `send` blocks."""
        return self._max_in_flight

    @max_in_flight_items.setter
    def max_in_flight_items(self, value: int) -> None:
        with self._data_ready:
            self._max_in_flight = int(value)
            self._window = min(self._window, self._max_in_flight)
            self._batch_items = _batch_items(self._max_in_flight)

    @property
    def num_unacked(self) -> int:
        """Items queued or sent that the server has not acknowledged yet."""
        return self._unacked

    @property
    def num_unacked_bytes(self) -> int:
        """Chunk bytes queued or sent whose items the server has not acknowledged yet."""
        return self._unacked_bytes

    @property
    def messages_in_ring(self) -> int:
        """Messages whose chunk bytes went through the shared-memory ring."""
        return self._ring_messages

    @property
    def window(self) -> int:
        """Unacknowledged items beyond which `send` blocks now (see the module docstring)."""
        return self._window

    def _over_window(self) -> bool:
        unacked = self._unacked
        return unacked > self._window or (unacked > 0 and self._unacked_bytes > _MAX_IN_FLIGHT_BYTES)

    def _raise_error(self) -> None:
        error = self._error
        raise type(error)(str(error))

    def _start(self, describe_tables: bool = False) -> None:
        metadata = tuple(self._client.metadata)
        if describe_tables:
            metadata += ((protocol.DESCRIBE_TABLES_METADATA_KEY, "1"),)
        self._call_describes_tables = describe_tables
        self._calls_made += 1
        self._call = self._client.insert_stream(self._requests(self._calls_made), metadata=metadata,
                                                timeout=self._timeout)
        self._reader = threading.Thread(target=self._read_acks, name="replay-insert-acks", daemon=True)
        self._reader.start()

    def table_infos(self, timeout: Optional[float] = None) -> Optional[dict]:
        """Table name -> `replay.TableInfo`, as the server described its tables when this
        stream started (starting it now if it has not). None when the stream failed or was
        closed first, or started without asking for them (a `send` started it); the caller
        then asks `server_info`, which also waits for a server that is not up yet (a stream
        that failed before it sent anything is made anew at its next use, so nothing is lost).

        Raises:
          DeadlineExceededError: the server did not describe its tables within `timeout`
            seconds (as `server_info` would raise).
        """
        with self._lock:
            if self._tables is None and self._error is None and not self._closing:
                if self._call is None:
                    self._start(describe_tables=True)
                elif not self._call_describes_tables:
                    return None
                if not self._acked.wait_for(lambda: self._tables is not None or self._error is not None,
                                            timeout):
                    raise errors.DeadlineExceededError(
                        f"ServerInfo call did not complete within provided timeout of {timeout}s (server "
                        f"{getattr(self._client, 'address', '?')}: the insert stream was not answered)")
            if self._tables is None and self._error is not None and self._messages_sent == 0 \
                    and not self._has_data():
                reader = self._reader
            else:
                return self._tables
        reader.join()
        with self._lock:  # nothing was sent or queued: the next `send` starts a new call
            if self._messages_sent == 0 and not self._has_data() and self._call is not None:
                self._call = self._reader = self._error = None
                self._closing = False
                self._calls_made += 1  # the failed call's request iterator ends
                self._data_ready.notify_all()
        return None

    def send(self, chunks: Sequence[Union[Chunk, codec.ChunkRow]], items: Sequence[codec.ItemRow],
             release_keys: Sequence[int] = ()) -> None:
        """Queues chunks, then items (as `codec.ItemRow`s), then releases; then blocks while
        more than the window's items or _MAX_IN_FLIGHT_BYTES of chunk bytes are unacked (a rate
        limiter holding inserts back keeps it blocked until it admits them).

        Raises:
          ResourceExhaustedError: a chunk is larger than the largest message.
          FailedPreconditionError: the stream is closed.
          Any error the stream failed with (for example UnavailableError).
        """
        for chunk in chunks:
            if chunk.nbytes > self._max_chunk_bytes:
                raise errors.ResourceExhaustedError(
                    f"chunk {chunk.key} holds {chunk.nbytes} bytes, more than one message may carry "
                    f"({self._client.max_message_bytes} bytes); use a smaller chunk_length or raise "
                    "max_message_bytes on both client and server")
        with self._lock:
            if self._error is not None:
                self._raise_error()
            if self._closing:
                raise errors.FailedPreconditionError("the writer is closed; create a new writer")
            if self._call is None:
                self._start()
            if chunks and not self._ring_considered:
                self._offer_ring(chunks)
            was_empty = self._iterator_waiting and not self._has_data()
            bytes_before = self._filling.chunks.nbytes
            full_before = len(self._full)
            self._pack(chunks, items, release_keys)
            added = self._filling.chunks.nbytes - bytes_before
            if len(self._full) != full_before:  # the first new full message was the one filling
                added += sum(self._full[i].chunks.nbytes for i in range(full_before, len(self._full)))
            self._unacked_bytes += added
            self._queued_items += len(items)
            self._unacked += len(items)
            if self._iterator_waiting and (self._queued_items >= self._target_items() or was_empty):
                self._data_ready.notify()
            if self._unacked > self._window or self._unacked_bytes > _MAX_IN_FLIGHT_BYTES:
                self._urgent = True
                self._data_ready.notify()
                while self._over_window() and self._error is None:
                    self._acked.wait()
            if self._error is not None:
                self._raise_error()

    def _target_items(self) -> int:
        """Queued items at which the request iterator sends without lingering."""
        return min(_TARGET_BATCH_ITEMS, self._batch_items)

    def _server_busy(self, acked: int = 0) -> bool:
        """Whether the server has yet to take up _BUSY_BACKLOG_MESSAGES full messages that went
        out, once `acked` more of them are acknowledged (call with the lock held)."""
        sent_unacked = self._unacked - self._queued_items
        return sent_unacked - acked >= _BUSY_BACKLOG_MESSAGES * self._target_items()

    def _offer_ring(self, chunks: Sequence[Union[Chunk, codec.ChunkRow]]) -> None:
        """Creates the ring the next message offers the server, when the writer's first chunks
        are large enough for it to pay (see _MIN_RING_CHUNK_BYTES) and shared memory is there
        (call with the lock held)."""
        self._ring_considered = True
        if not self._shared_memory:
            return
        chunk_bytes = sum(chunk.nbytes for chunk in chunks) / len(chunks)
        if chunk_bytes >= _MIN_RING_CHUNK_BYTES:
            unacked_bytes = min(_MAX_IN_FLIGHT_BYTES, self._max_in_flight * chunk_bytes)
            message_bytes = min(_MAX_BATCH_BYTES, self._batch_items * chunk_bytes)
            self._ring = shared_ring.ClientRing.create(int(unacked_bytes * 3 // 2 + 2 * message_bytes))
            self._ring_to_name = self._ring is not None

    def _in_ring(self, packed: framing.PackedInsertRequest, has_items: bool, name_ring: bool
                 ) -> framing.PackedInsertRequest:
        """`packed` with its chunk bytes moved into the ring where the server opened it and it
        has room (else as it was), or naming the ring (`name_ring`); notes the ring total the
        message's ack gives back (every message with items has one, 0 before the ring)."""
        ring = self._ring
        if ring is not None and name_ring:
            packed.request.ring_name = ring.name
            packed.request.ring_nonce = ring.nonce
        elif ring is not None and self._ring_opened and packed.column_data:
            try:
                placed = ring.place(packed.column_data)
            except ValueError:  # the stream ended meanwhile and closed the ring
                placed = None
            if placed is not None:
                offsets, lengths, self._ring_mark = placed
                self._ring_messages += 1
                packed.request.ring.offsets.extend(offsets)
                packed.request.ring.lengths.extend(lengths)
                packed = framing.PackedInsertRequest(packed.request, [])
        if has_items:
            with self._lock:
                self._ring_marks.append(self._ring_mark)
        return packed

    def _has_data(self) -> bool:
        return bool(self._full) or bool(self._filling)

    def _pack(self, chunks: Sequence[Union[Chunk, codec.ChunkRow]], items: Sequence[codec.ItemRow],
              release_keys: Sequence[int]) -> None:
        """Appends to the message being filled, starting a new one where a limit is reached
        (call with the lock held). Chunks go before the items that follow them, so an item
        never travels in an earlier message than its chunks."""
        message = self._filling
        if len(chunks) == 1 and message.chunks.nbytes + chunks[0].nbytes <= _MAX_BATCH_BYTES:
            message.chunks.add(chunks)  # (a writer's usual call: one chunk, one item)
        else:
            for chunk in chunks:
                if message.chunks.nbytes + chunk.nbytes > _MAX_BATCH_BYTES and message:
                    message = self._next_message()
                message.chunks.add((chunk,))
        if len(items) <= self._batch_items - len(message.items.keys):
            if items:
                message.items.add(items)
            if release_keys:
                message.releases.extend(release_keys)
            return
        start = 0
        while start < len(items):
            room = self._batch_items - len(message.items)
            if room <= 0:
                message = self._next_message()
                continue
            part = items if start == 0 and len(items) <= room else items[start:start + room]
            message.items.add(part)
            start += len(part)
        message.releases.extend(release_keys)

    def _next_message(self) -> _Message:
        self._full.append(self._filling)
        self._filling = _Message()
        return self._filling

    def wait(self, max_unacked: int = 0, timeout: Optional[float] = None) -> None:
        """Sends everything queued now and blocks until at most `max_unacked` items are
        unacknowledged.

        Raises:
          DeadlineExceededError: not within `timeout` seconds; any error the stream failed with.
        """
        with self._data_ready:
            self._send_queued_now_locked()
            done = self._acked.wait_for(lambda: self._unacked <= max_unacked or self._error is not None,
                                        timeout)
            if self._error is not None:
                self._raise_error()
            if not done:
                raise errors.DeadlineExceededError(
                    f"{self._unacked} items are still unacknowledged after {timeout} s (wanted at most "
                    f"{max_unacked}); the tables' rate limiters may be blocking inserts ({self._progress()})")

    def _send_queued_now_locked(self) -> None:
        """Has the request iterator send what is queued without lingering (the lock held)."""
        if self._has_data():
            self._urgent = True
            self._data_ready.notify()

    def drain(self, limit_seconds: float, stall_seconds: float) -> bool:
        """Sends everything queued and waits for its acks while they keep coming: at most
        `limit_seconds` in all, and never longer than `stall_seconds` without an ack or once the
        server reports a message waiting for a rate limiter (its acks may be far off). Returns
        whether every item was acknowledged; raises nothing. For a writer dropped without
        `close`, whose finalizer may run in any thread (the garbage collector's), so it must not
        hold that thread for long."""
        if sys.is_finalizing():
            return False  # no ack can come: gRPC's threads are stopped at interpreter exit
        deadline = time.monotonic() + limit_seconds
        with self._data_ready:
            self._send_queued_now_locked()
            while self._unacked > 0 and self._error is None and not self._message_waited:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                acks = self._acks_received
                self._acked.wait_for(lambda: self._acks_received != acks or self._error is not None
                                     or self._message_waited, min(remaining, stall_seconds))
                if self._acks_received == acks:
                    break  # stalled, failed or held back by a rate limiter
            return self._unacked == 0 and self._error is None

    def _progress(self) -> str:
        """What the stream sent and got back (for timeout messages; call with the lock held)."""
        last = ("no ack yet" if self._last_ack_time is None
                else f"the last ack {time.monotonic() - self._last_ack_time:.1f} s ago")
        return (f"{self._messages_sent} messages sent, {self._acks_received} acked, {last}, "
                f"{self._waiting_reports} reports of waiting for a rate limiter, "
                f"{'messages still queued' if self._has_data() else 'nothing queued'}")

    def close(self, cancel: bool = False) -> None:
        """Ends the stream after everything queued was sent (does not wait for acks); with
        `cancel`, cancels the call at once instead (on the server too: items not acked yet may
        or may not have been inserted, and none is inserted later). At interpreter exit the
        call is only kept, never freed: gRPC's threads are stopped by then, and a cancel, a wait
        for the reader or the call's own finalizer would wait for them forever (a writer
        finalized by the last collection; `replay.exit_safety`)."""
        if self._keep_if_finalizing(self._call):
            return
        with self._data_ready:
            self._closing = True
            self._data_ready.notify_all()
        if cancel:
            if self._call is not None:
                self._call.cancel()
            return
        if self._reader is not None and threading.current_thread() is not self._reader:
            self._reader.join(timeout=5.0)
            if self._reader.is_alive():
                self._call.cancel()

    def _requests(self, call_number: int):
        ready = self._data_ready
        while True:
            with ready:
                self._iterator_waiting = True
                while not self._has_data() and not self._closing and self._error is None \
                        and self._calls_made == call_number:
                    ready.wait()
                if self._calls_made != call_number:
                    return
                target = self._target_items()
                if not self._full and self._queued_items < target and not self._urgent and self._has_data():
                    ready.wait_for(lambda: self._urgent or self._closing or self._error is not None
                                   or self._queued_items >= target, _LINGER_SECONDS)
                    if self._server_busy():
                        # The server has not taken up what went out yet: a partial message now
                        # would only wait there, so fill it (until the server catches up).
                        ready.wait_for(lambda: self._urgent or self._closing or self._error is not None
                                       or self._queued_items >= target or not self._server_busy(),
                                       _BUSY_LINGER_SECONDS)
                self._iterator_waiting = False
                if self._error is not None or (not self._has_data() and self._closing):
                    return
                if self._full:
                    message = self._full.popleft()
                else:
                    message, self._filling = self._filling, _Message()
                self._queued_items -= len(message.items)
                if len(message.items):
                    self._sent_bytes.append(self._bytes_without_items + message.chunks.nbytes)
                    self._bytes_without_items = 0
                else:
                    self._bytes_without_items += message.chunks.nbytes
                if not self._has_data():
                    self._urgent = False
                self._messages_sent += 1
                name_ring, self._ring_to_name = self._ring_to_name, False
            yield self._in_ring(message.request(), bool(len(message.items)), name_ring)

    def _read_acks(self) -> None:
        error = None
        try:
            for response in self._call:
                if response.HasField("server_info"):
                    tables = server_replies.tables_from_server_info(response.server_info)
                    with self._lock:
                        self._tables = tables
                        self._acked.notify_all()
                    continue
                ring = self._ring
                if response.ring_opened and ring is not None and not self._ring_opened:
                    ring.unlink()  # the server has it mapped: its name can go
                    self._ring_opened = True
                with self._lock:
                    acked = len(response.item_keys)
                    if not acked:  # the server reports the oldest unacked message waiting
                        self._waiting_reports += 1
                        self._message_waited = True
                        self._window = min(_RATE_LIMITED_WINDOW_ITEMS, self._max_in_flight)
                        self._acked.notify_all()  # (`drain` stops waiting)
                        continue
                    if self._iterator_waiting and self._server_busy() and not self._server_busy(acked):
                        self._data_ready.notify()  # the server caught up: send without filling
                    self._unacked -= acked
                    self._acks_received += 1
                    self._last_ack_time = time.monotonic()
                    if self._sent_bytes:
                        self._unacked_bytes -= self._sent_bytes.popleft()
                    if self._ring_marks:
                        # the server copied this message's ring bytes, and every earlier one's
                        mark = self._ring_marks.popleft()
                        if ring is not None:
                            ring.release(mark)
                    if self._message_waited:
                        self._message_waited = False
                    elif self._window < self._max_in_flight:
                        self._window = min(2 * self._window, self._max_in_flight)
                    self._acked.notify_all()
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED or not self._closing:
                error = _translate(e)
        with self._acked:
            if error is None and (self._unacked > 0 or not self._closing):
                error = errors.UnavailableError(
                    "the replay server ended the insert stream before acknowledging "
                    f"{self._unacked} items; check the server")
            if error is not None:
                self._error = error
            self._closing = True
            self._acked.notify_all()
            self._data_ready.notify_all()
        if self._ring is not None:
            self._ring.close()


def _batch_items(max_in_flight_items: int) -> int:
    """Items one message takes at most, for a writer with this item budget."""
    return max(1, min(_MAX_BATCH_ITEMS, max(min(_MIN_BATCH_ITEMS, max_in_flight_items),
                                            max_in_flight_items // _MESSAGES_PER_WINDOW)))


def _translate(error: grpc.RpcError) -> errors.ReplayError:
    return rpc_errors.translate_rpc_error(error, "writing to the replay server")
