"""The replay server's SampleStream: samplers' credit turned into responses of many items each,
built one ahead of the one being sent, with their chunk bytes outside the protobuf message.

Part of the replay server (replay/server.py): `SampleService` is a base of its servicer. A
stream's producer task samples as the client's credit allows (waiting for the table's rate
limiter on its change signal, `server_scheduling.TableSignals`), sizes responses by the items'
bytes, encodes them (columnar when asked for and the items allow it, `column_batch`; else
with their chunks, `codec`) and serializes them (`framing.serialize_sample_response`); a reader
on this host that named a shared-memory ring gets the column bytes there (`replay.shared_ring`).
See `replay.client` and `replay.sample_streams` for the reader's side.
"""
from __future__ import annotations

import asyncio
from typing import List, Optional, Tuple

import grpc

from replay import codec, column_batch, errors, framing, shared_ring
from replay.proto import replay_pb2
from replay.server_calls import MalformedRequest, check_request, end_failed_call
from replay.server_scheduling import RECHECK_SECONDS

# Rough upper bound of the chunk bytes put in one sample response, and of its items when the
# request leaves the number to the server. A response costs its receiver a fixed few hundred
# microseconds (gRPC's hand-offs between threads, one tf.data block): in the 40 kB dataset case
# of tools/compare_reverb.py 4 MB / 256-item responses took 27-29 us of the reader's CPU per
# item, 16 MB / 512 19-21 us.
_SAMPLE_RESPONSE_BYTES = 16 * 1024 * 1024
_DEFAULT_SAMPLE_BATCH = 512
# A response carries at most a quarter of the stream's budget (the most credit it was given),
# unless that is below this many bytes: a response of a whole budget of large items left the
# server idle while the reader received it, and the reader idle while the next was built (40 kB
# items, 384 in flight: 5.1k items/s against Reverb's 9.9k with less CPU per item); a reader
# tops its credit up once a quarter of it arrived, so quarters keep both sides busy. Small
# items still come a whole budget to a response.
_MIN_SPLIT_RESPONSE_BYTES = 1024 * 1024
# A SampleStream's requests read ahead of its producer (credit top-ups; ring releases are applied
# as they come and not queued): a client sends one top-up per response at most, so a few
# suffice, and the bound keeps a client that floods requests from filling the server's memory.
_QUEUED_SAMPLE_REQUESTS = 64


class SampleService:
    """SampleStream and its steps, a base of the server's servicer, which provides `_server`,
    `_work` (a `WorkQueue`), `_signals` (per table), `open_streams`, `_check_call`,
    `_open_stream` and `_table`."""

    async def SampleStream(self, request_iterator, context):
        opened = False
        producer = None
        try:
            self._check_call(context)
            self._open_stream()
            opened = True
            # The stream's responses are sampled and serialized by a task of their own, one
            # response ahead of the one being sent: a send waits on the transport (the client
            # reading), and the next response is built meanwhile instead of after it.
            ready: "asyncio.Queue" = asyncio.Queue(maxsize=1)
            producer = asyncio.get_running_loop().create_task(
                self._produce_sample_responses(request_iterator, ready))
            while True:
                response = await ready.get()
                ready.task_done()
                if response is None:
                    return
                if isinstance(response, Exception):
                    raise response
                yield response
                response = None
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:  # noqa: BLE001 - a named status, or INTERNAL with the traceback logged
            await end_failed_call(context, e, "SampleStream")
        finally:
            if producer is not None:
                producer.cancel()
            if opened:
                self.open_streams -= 1

    async def _produce_sample_responses(self, request_iterator, ready: "asyncio.Queue") -> None:
        """SampleStream's producer: takes the requests (credit, settings) as
        `_read_sample_requests` hands them on, samples as the credit allows and puts each
        response's wire bytes on `ready`, then None when the client ends its requests, or the
        exception that ends the stream. It builds a response only once the previous one was
        taken, so at most one waits besides the one being sent. A reader on this host that named
        a shared-memory ring gets the responses' column bytes there (`replay.shared_ring`)."""
        requests: "asyncio.Queue" = asyncio.Queue(_QUEUED_SAMPLE_REQUESTS)
        ring_holder: List[Optional[shared_ring.ServerRing]] = [None]
        reader = asyncio.get_running_loop().create_task(
            _read_sample_requests(request_iterator, requests, ring_holder))
        try:
            limit = self._server.max_sample_batch_size
            response_bytes = min(_SAMPLE_RESPONSE_BYTES, self._server.max_in_flight_bytes_per_stream)
            credit, table, timeout_ms, max_batch = 0, None, -1, min(_DEFAULT_SAMPLE_BATCH, limit)
            budget = 0  # the most credit the stream had at once
            columnar = False
            item_bytes = 0  # running estimate of one item's chunk bytes, to size responses
            while True:
                if credit <= 0:
                    request = await requests.get()
                    if request is None:
                        await ready.put(None)
                        return
                    if isinstance(request, Exception):
                        raise request
                    check_request(request)
                    if table is None or request.table:
                        table = self._table(request.table)
                    if request.num_samples < 0:
                        raise errors.InvalidArgumentError(
                            f"num_samples must be >= 0, got {request.num_samples}")
                    if request.max_batch_size > limit:
                        raise errors.InvalidArgumentError(
                            f"max_batch_size {request.max_batch_size} is over the server's "
                            f"max_sample_batch_size limit ({limit}); ask for at most {limit} items per "
                            "response, or start the server with a higher max_sample_batch_size "
                            "(replay-server --max-sample-batch-size)")
                    credit += request.num_samples
                    budget = max(budget, credit)
                    if request.table:
                        # Credit top-ups name no table and keep the stream's settings.
                        timeout_ms = request.rate_limiter_timeout_ms
                        columnar = request.columnar
                    if request.max_batch_size > 0:
                        max_batch = request.max_batch_size
                    if request.max_response_bytes > 0:
                        # Half the client's limit leaves room for items larger than the estimate.
                        response_bytes = max(1, min(response_bytes, request.max_response_bytes // 2))
                    continue
                # Until a response has told the size of an item, the first sampled item's size
                # bounds how many more join it (see `_take_samples`).
                want = min(credit, max_batch)
                if item_bytes:
                    want = max(1, min(want, response_bytes // item_bytes,
                                      max(budget // 4, _MIN_SPLIT_RESPONSE_BYTES // item_bytes)))
                ring = ring_holder[0]
                response, nbytes, count = await self._sample(table, want, timeout_ms, columnar,
                                                             None if item_bytes else response_bytes,
                                                             ring is not None)
                credit -= count
                item_bytes = max(1, nbytes // count)
                if ring is not None:
                    _place_in_ring(response, ring)
                await ready.put(framing.serialize_sample_response(response))
                self._server.chunk_store.note_read(nbytes)
                response = None
                await ready.join()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - handed to SampleStream, which ends the call with it
            await ready.put(e)
        finally:
            reader.cancel()
            if ring_holder[0] is not None:
                ring_holder[0].close()

    async def _sample(self, table, want: int, timeout_ms: int, columnar: bool,
                      byte_budget: Optional[int] = None, columns_outside: bool = False):
        """A response with up to `want` samples of `table` (and, given `byte_budget`, about
        that many chunk bytes at most; see `_take_samples`), once its rate limiter allows: the
        response, its data bytes and its number of samples. With `columns_outside` a columnar
        response's column bytes are its `column_data` (see `_sample_response`).

        Raises:
          DeadlineExceededError: none within `timeout_ms` (< 0: waits until the call is cancelled).
          CancelledError: the table closed.
        """
        signals = self._signals[id(table)]
        loop = asyncio.get_running_loop()
        deadline = None
        while True:
            event = signals.take("sample")
            taken = await self._work.run(_take_samples, table, want, columnar, byte_budget,
                                         columns_outside)
            if taken is not None:
                return taken
            wait = RECHECK_SECONDS
            if timeout_ms >= 0:
                if deadline is None:
                    deadline = loop.time() + timeout_ms / 1000.0
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise errors.DeadlineExceededError(
                        f"table {table.name!r}: sample timed out after {timeout_ms / 1000.0:g} s: "
                        f"{table.sample_blocker()}")
                wait = min(wait, remaining)
            await signals.wait(event, wait)


def _take_samples(table, want: int, columnar: bool, byte_budget: Optional[int] = None,
                  columns_outside: bool = False):
    """Samples up to `want` items of `table` without waiting and encodes them: (response, data
    bytes, number of samples), or None when the rate limiter allows none now. The samples are
    not kept: a cancelled stream holds no items.

    With `byte_budget` (a stream's first response, before any item's size is known) one item is
    sampled first and its chunk bytes bound how many more join it, so that the response stays
    within the budget (for items of that size) while still carrying up to `want` items."""
    sampled = table.try_sample(1 if byte_budget is not None else want)
    if not sampled:
        return None
    if byte_budget is not None and want > 1:
        item_bytes = max(1, sum(chunk.nbytes for chunk in sampled[0].item.chunks.values()))
        more = min(want, byte_budget // item_bytes) - 1
        if more > 0:
            sampled += table.try_sample(more)
    response, nbytes = _sample_response(table.name, sampled, columnar, columns_outside)
    return response, nbytes, len(sampled)


def _sample_response(table_name: str, sampled, columnar: bool = False,
                     columns_outside: bool = False) -> Tuple[framing.PackedSampleResponse, int]:
    """The response carrying `sampled` and the bytes of their data: columnar when asked for and
    the items allow it (`column_batch.encode_columns`), else with their chunks (chunk bytes outside the
    message). With `columns_outside` a columnar response's column bytes too are left out of
    the message, as its `column_data` (for `_place_in_ring`, which puts them back when the ring
    has no room)."""
    response = replay_pb2.SampleResponse()
    response.probabilities.extend([s.probability for s in sampled])
    response.table_sizes.extend([s.table_size for s in sampled])
    response.priorities.extend([s.priority for s in sampled])
    response.times_sampled.extend([s.times_sampled for s in sampled])
    if columnar:
        column_bytes: Optional[List[bytes]] = [] if columns_outside else None
        nbytes = column_batch.encode_columns([s.item for s in sampled], response.columns, column_bytes)
        if nbytes is not None:
            codec.encode_items([(table_name, s.item) for s in sampled], response.items,
                              with_slices=False)
            return framing.PackedSampleResponse(response, column_bytes or []), nbytes
    column_data: List[bytes] = []
    nbytes = codec.encode_span_sample(table_name, [s.item for s in sampled], response.items,
                                      response.chunks, column_data)
    if nbytes is not None:
        return framing.PackedSampleResponse(response, column_data), nbytes
    chunks = {}
    for s in sampled:
        chunks.update(s.item.chunks)
    codec.encode_items([(table_name, s.item) for s in sampled], response.items)
    codec.encode_chunks(chunks.values(), response.chunks, column_data)
    return framing.PackedSampleResponse(response, column_data), sum(c.nbytes for c in chunks.values())


async def _read_sample_requests(request_iterator, requests: "asyncio.Queue",
                                ring_holder: List[Optional[shared_ring.ServerRing]]) -> None:
    """Reads a SampleStream's requests as they come, while its producer samples: a ring named in
    the first request is opened into `ring_holder[0]`, ring releases are applied at once (a
    producer with credit left reads no request, and would see the ring full), and every other
    request is handed on through `requests`, then None at their end, or the exception that
    ended them."""
    try:
        async for request in request_iterator:
            if not isinstance(request, MalformedRequest):
                if request.ring_name and ring_holder[0] is None:
                    ring_holder[0] = shared_ring.ServerRing.open(request.ring_name, request.ring_nonce)
                if request.ring_released:
                    if ring_holder[0] is not None:
                        ring_holder[0].release(request.ring_released)
                    if not request.num_samples and not request.table:
                        continue  # a release only
            await requests.put(request)
        await requests.put(None)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - the producer ends the call with it
        await requests.put(e)


def _place_in_ring(packed: framing.PackedSampleResponse, ring: shared_ring.ServerRing) -> None:
    """Moves the column bytes of `packed` (chunk columns, or a columnar response's columns,
    which `_sample_response` left outside the message) into the reader's ring and says where in
    `response.ring`; when the ring has no room now, a columnar response's bytes go back into
    the message and chunk columns stay inline."""
    response = packed.response
    placed = ring.place(packed.column_data) if packed.column_data else None
    if placed is None:
        if response.HasField("columns") and packed.column_data:
            response.columns.data.extend(packed.column_data)
            packed.column_data = []
        return
    offsets, lengths, release = placed
    response.ring.offsets.extend(offsets)
    response.ring.lengths.extend(lengths)
    response.ring.release = release
    packed.column_data = []
