"""The replay server's InsertStream: writers' messages of chunks, items and chunk releases
stored and inserted, with the flow control and fairness that keep many writers served.

Part of the replay server (replay/server.py): `InsertService` is a base of its servicer. Each
message is read in the stream's turn (`server_scheduling.Turn`, when many streams are open),
its chunks stored (keeping alive per stream the chunks the writer may still reference, within
max_in_flight_bytes_per_stream) and its items inserted as far as the tables' rate limiters
allow; what they hold back waits in line behind the other streams' messages for the table
(`server_scheduling.InsertLine`), and the writer is told so (an ack without keys) before the
message's real ack. See `replay.insert_stream` for the writer's side.
"""
from __future__ import annotations

import asyncio
from typing import Dict, List, Optional, Tuple

import grpc

from replay import codec, errors, protocol, shared_ring
from replay.proto import replay_pb2
from replay.server_calls import check_request, end_failed_call
from replay.server_scheduling import RECHECK_SECONDS, Turn

# An insert that had to wait is not made when less than this is left of its call's deadline:
# its client is about to give up, and the ack would arrive too late for it to count.
_INSERT_DEADLINE_GUARD_SECONDS = 0.05
# Insert messages with more chunk bytes than this are decoded (checksums) in the thread pool, so
# that the event loop stays free for other calls.
_DECODE_IN_POOL_BYTES = 1024 * 1024
# When more streams than this are open, at most this many insert streams read and store a
# message at once; the others wait their turn (in arrival order) before reading their next
# message. Every stream that has asked for a message costs a step of the event loop when it
# arrives, so without this bound hundreds of busy writers make each turn of the loop last half a
# second, and new calls and `server_info` wait as long. An insert stream whose writer has
# nothing to send gives its turn up after _IDLE_READ_SECONDS, so idle writers hold no turn.
_ACTIVE_INSERT_STREAMS = 16
_IDLE_READ_SECONDS = 0.002
# What an insert stream sends before a message's items wait for a rate limiter (see
# `replay.insert_stream`, flow control).
_WAITING_FOR_RATE_LIMITER = replay_pb2.InsertResponse()


def _asks_for_tables(context) -> bool:
    return any(key == protocol.DESCRIBE_TABLES_METADATA_KEY
               for key, _ in (context.invocation_metadata() or ()))


class InsertService:
    """InsertStream and its steps, a base of the server's servicer, which provides `_server`,
    `_work` (a `WorkQueue`), `_signals` and `_insert_lines` (per table), `open_streams`,
    `_check_call`, `_open_stream`, `_table` and `_tables_response`."""

    def start_inserts(self) -> None:
        """Creates the turns of the active insert streams (on the event loop's thread)."""
        self._insert_turns = asyncio.Semaphore(_ACTIVE_INSERT_STREAMS)


    async def InsertStream(self, request_iterator, context):
        keep_alive: Dict[int, object] = {}
        opened = False
        ring: Optional[shared_ring.ServerRing] = None
        announce_ring = False  # the next response tells the writer its ring was opened
        try:
            self._check_call(context)
            self._open_stream()
            opened = True
            if _asks_for_tables(context):
                await context.write(self._tables_response())
            store = self._server.chunk_store
            limit = self._server.max_in_flight_bytes_per_stream
            held = 0  # chunk bytes kept alive for this stream's writer

            def resolve(key):
                chunk = keep_alive.get(key)
                if chunk is None:
                    chunk = store.get([key])[0]
                return chunk

            messages = request_iterator.__aiter__()
            while True:
                turn = Turn(self._insert_turns)
                try:
                    if self.open_streams > _ACTIVE_INSERT_STREAMS:
                        await turn.take()
                        request = await self._read_in_turn(messages, turn)
                    else:  # few streams: a turn of the loop is short anyway
                        request = await anext(messages, None)
                    if request is None:
                        break
                    check_request(request)
                    chunks = None
                    # the chunk bytes come apart from the message (framing.parse_insert_request)
                    request, column_data = request.request, request.column_data
                    if request.ring_name and ring is None:
                        ring = shared_ring.ServerRing.open(request.ring_name, request.ring_nonce)
                        announce_ring = ring is not None
                    if request.HasField("ring"):
                        column_data = _ring_views(ring, request.ring)
                    if sum(map(len, column_data)) > _DECODE_IN_POOL_BYTES:
                        column_data, chunks = await asyncio.get_running_loop().run_in_executor(
                            self._server._executor, _decode, request.chunks, column_data)  # noqa: SLF001
                    elif request.HasField("ring"):
                        column_data = list(map(bytes, column_data))
                    step = (self._take_message, request, chunks, column_data, keep_alive, held, limit,
                            resolve)
                    freezer = self._server._gc_freezer  # noqa: SLF001 - same module
                    if freezer is not None:  # the new items and chunks leave the collector's view at once
                        step = (freezer.freezing,) + step
                    held, pending = await self._work.run(*step)
                    chunks = column_data = step = None
                finally:
                    turn.give_up()
                if request.items.keys:
                    if pending:
                        # An ack without keys tells the writer that its message waits for a
                        # rate limiter, so it stops sending more than a few items ahead.
                        if announce_ring:
                            announce_ring = False
                            yield replay_pb2.InsertResponse(ring_opened=True)
                        else:
                            yield _WAITING_FOR_RATE_LIMITER
                        await self._insert_waiting(pending, context)
                    pending = None
                    yield replay_pb2.InsertResponse(item_keys=request.items.keys, ring_opened=announce_ring)
                    announce_ring = False
                held -= self._release(keep_alive, request.release_chunk_keys)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:  # noqa: BLE001 - a named status, or INTERNAL with the traceback logged
            await end_failed_call(context, e, "InsertStream")
        finally:
            keep_alive.clear()
            if ring is not None:
                ring.close()
            if opened:
                self.open_streams -= 1

    @staticmethod
    async def _read_in_turn(messages, turn: "Turn"):
        """The stream's next message (None at its end), read while holding `turn`; a writer that
        sends nothing for _IDLE_READ_SECONDS waits without its turn and takes one again when its
        message has come."""
        read = asyncio.ensure_future(messages.__anext__())
        try:
            done, _ = await asyncio.wait((read,), timeout=_IDLE_READ_SECONDS)
            if not done:
                turn.give_up()
                await asyncio.wait((read,))
                await turn.take()
            try:
                return read.result()
            except StopAsyncIteration:
                return None
        finally:
            if not read.done():
                read.cancel()

    def _take_message(self, request, chunks, column_data, keep_alive: Dict[int, object], held: int,
                      limit: int, resolve):
        """Stores the message's chunks (`chunks` when already decoded; `column_data`: the
        message's chunk bytes, read out of it) and inserts its items
        while the rate limiters allow; returns the chunk bytes the stream then holds (before the
        message's releases) and what is left to insert (see `_insert_now`).

        Raises:
          ResourceExhaustedError: the stream would hold more than `limit` chunk bytes once the
            message's releases are done (nothing is stored).
          The validation errors of `codec.decode_chunks`, `codec.decode_items` and the tables.
        """
        if request.chunks.keys:
            if chunks is None:
                chunks = codec.decode_chunks(request.chunks, column_data=column_data)
            released = set(request.release_chunk_keys)
            by_key = {c.key: c for c in chunks}
            sizes = [c.nbytes for c in chunks]
            usual = keep_alive.keys().isdisjoint(by_key) and released.isdisjoint(by_key)
            if usual:  # a writer's usual message: new chunks only
                after = held + sum(sizes)
            else:
                after = held + sum(size for chunk, size in zip(chunks, sizes)
                                   if chunk.key not in keep_alive and chunk.key not in released)
            after -= sum(keep_alive[k].nbytes for k in released.intersection(keep_alive))
            if after > limit:
                raise errors.ResourceExhaustedError(
                    f"this insert stream would hold {after} bytes of chunks its writer has not released, "
                    f"over the server's max_in_flight_bytes_per_stream limit ({limit}); keep fewer steps "
                    "alive (num_keep_alive_refs), or start the server with a higher limit "
                    "(replay-server --max-in-flight-bytes-per-stream)")
            stored = self._server.chunk_store.insert(chunks)
            if usual and stored is chunks:  # the store had none of them (distinct keys): it kept these
                keep_alive.update(by_key)
                held += sum(sizes)
            else:
                kept = {chunk.key: chunk for chunk in stored if chunk.key not in keep_alive}
                keep_alive.update(kept)
                held += sum(chunk.nbytes for chunk in kept.values())
        if not request.items.keys:
            return held, []
        pairs = codec.decode_items(request.items, resolve)
        return held, self._insert_now(self._validated_groups(pairs))

    @staticmethod
    def _release(keep_alive: Dict[int, object], keys) -> int:
        """Drops the released chunks from a stream's keep-alive map; returns their bytes."""
        if not keys:
            return 0
        released = [keep_alive.pop(key, None) for key in keys]
        return sum(chunk.nbytes for chunk in released if chunk is not None)

    def _validated_groups(self, pairs):
        """The items of a message as (table, items) runs, every item validated first, so a bad
        item for one table inserts nothing anywhere."""
        groups = []  # consecutive runs of items for the same table
        for name, item in pairs:
            if not groups or groups[-1][0] != name:
                groups.append((name, []))
            groups[-1][1].append(item)
        return [(table, table.validate_items(items))
                for table, items in ((self._table(name), items) for name, items in groups)]

    def _insert_now(self, groups):
        """Inserts the runs in order while the rate limiters allow (none into a table that other
        streams' messages wait for: they go first); returns what is left as (table, items,
        number already inserted) runs, empty when everything went in."""
        lines = self._insert_lines
        for i, (table, items) in enumerate(groups):
            line = lines.get(id(table))
            done = table.try_insert_many(items) if line is None or not line.waiting else 0
            if done < len(items):
                return [(table, items, done)] + [(t, rest, 0) for t, rest in groups[i + 1:]]
        return []

    async def _insert_waiting(self, pending, context) -> None:
        """Inserts what `_insert_now` left, waiting for each table's rate limiter in turn, in
        line behind the messages of other streams that wait for it (`InsertLine`)."""
        for table, items, done in pending:
            signals = self._signals[id(table)]
            line = self._insert_lines[id(table)]
            turn = line.join()
            try:
                await turn.wait()
                waited = True  # refused, or behind a refused run or other streams' messages
                while True:
                    event = signals.take("insert")
                    if waited:
                        remaining = context.time_remaining()
                        if remaining is not None and remaining < _INSERT_DEADLINE_GUARD_SECONDS:
                            raise errors.DeadlineExceededError(
                                f"table {table.name!r}: the insert was still waiting when its call's "
                                f"deadline came ({done} of {len(items)} items of the message were "
                                f"inserted): {table.insert_blocker()}")
                    done += await self._work.run(table.try_insert_many, items[done:] if done else items)
                    if done == len(items):
                        break
                    await signals.wait(event, RECHECK_SECONDS)
                    waited = True
            finally:
                line.leave(turn)


def _ring_views(ring: Optional[shared_ring.ServerRing], placed) -> List[memoryview]:
    """Views of a message's chunk bytes in its writer's ring (`placed`: its RingData).

    Raises:
      InvalidArgumentError: the stream has no ring open (no earlier message named one, or it
        named one this server could not open).
      DataLossError: the columns lie outside the ring.
    """
    if ring is None:
        raise errors.InvalidArgumentError(
            "an insert message placed its chunk bytes in a shared-memory ring, but the stream has "
            "none open (an earlier message must name one, and the server must have said it opened "
            "it); send the bytes in the message")
    return ring.views(placed.offsets, placed.lengths, "an insert message")


def _decode(chunks, column_data: List) -> Tuple[List[bytes], list]:
    """(the message's chunk bytes as bytes, its decoded chunks): the thread pool's part of a
    large message. Bytes in the writer's ring are copied out before they are checked, so that
    the writer cannot change them afterwards."""
    column_data = [column if type(column) is bytes else bytes(column) for column in column_data]
    return column_data, codec.decode_chunks(chunks, True, column_data)
