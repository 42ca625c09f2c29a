"""The replay client: every call a program makes to a replay server goes through `Client`.

`Client` is Reverb 0.14's `Client` (`replay.reverb.Client` is the same class): what rollout
workers write through (`writer`, `trajectory_writer`, `structured_writer`, `insert`) and what
learners read through (`sample`; `sample_responses`, which `ReplayDataset` builds on), plus the
control calls (`mutate_priorities`, `reset`, `server_info`, `checkpoint`). A client pickles by
address (token and TLS root certificate included), so it can be handed to Ray actors; the gRPC
channel is created lazily in each process. See docs/architecture.md, "Inside the replay server".

gRPC failures are raised as the matching `replay.errors` class (the exact class the server
raised when it names one), so callers catch the same exceptions as in-process.
"""
from __future__ import annotations

import atexit
import queue
import sys
import threading
import time
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import numpy as np
import tree

from replay import (codec, column_batch, errors, exit_safety, framing, protocol, replay_sample,
                    rpc_errors, server_replies, shared_ring, validation)
from replay.proto import replay_pb2, replay_pb2_grpc
from replay.replay_sample import ReplaySample, SampleInfo
from replay.table_info import TableInfo

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# Samples `Client.sample` lets the server send ahead of those consumed.
DEFAULT_SAMPLE_IN_FLIGHT = 256
# Reverb's legacy writer closes chunks of min(10, max_sequence_length) steps by default, and takes
# max_in_flight_items=None as "unlimited" (this many).
DEFAULT_LEGACY_CHUNK_LENGTH = 10
UNLIMITED_IN_FLIGHT_ITEMS = 1_000_000
# `server_info(timeout)` asks again this often while the server is not up.
SERVER_INFO_RETRY_SECONDS = 0.05
# A sample call's gRPC deadline is its timeout plus this, so that the server's own timeout (which
# says what blocked the sample) arrives before the deadline cuts the call.
SAMPLE_DEADLINE_ALLOWANCE_SECONDS = 1.0
# Full method names in replay.proto (as in the generated stub).
INSERT_STREAM_METHOD = f"/{protocol.SERVICE_NAME}/InsertStream"
SAMPLE_STREAM_METHOD = f"/{protocol.SERVICE_NAME}/SampleStream"


# Clients whose channel is open, closed at interpreter exit (`_close_channels_at_exit`).
_CLIENTS_WITH_CHANNELS: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _close_channels_at_exit() -> None:
    """Closes every open channel while gRPC's threads still run (atexit callbacks run before
    the interpreter stops its threads). A call left in a reference cycle (an unfinished sample
    stream, a dataset's reader) is otherwise finalized by the interpreter's last collection,
    where gRPC's own finalizer waits for a lock that a stopped gRPC thread may hold: the process
    then never exits."""
    for client in list(_CLIENTS_WITH_CHANNELS):
        try:
            client.close()
        except Exception:  # noqa: BLE001 - nothing to report to at exit
            pass


atexit.register(_close_channels_at_exit)


def _several_addresses(address) -> bool:
    return isinstance(address, (list, tuple)) or (isinstance(address, str) and "," in address)


def connect(address: Union[str, Sequence[str]], *, token: Optional[str] = None,
            root_certificates: Optional[Union[bytes, str]] = None,
            max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
    """A client of the replay server at `address` ("host:port"): a `Client`; or, given several
    addresses (a list, or "host:port,host:port"), a `replay.sharded_client.ShardedClient` over
    those servers. The keyword arguments are those of `Client`, used for every server.

    Raises:
      InvalidArgumentError: an empty list of addresses, or the same address twice.
    """
    options = dict(token=token, root_certificates=root_certificates, max_message_bytes=max_message_bytes)
    if not _several_addresses(address):
        return Client(address, **options)
    from replay.sharded_client import ShardedClient

    addresses = address.split(",") if isinstance(address, str) else list(address)
    return ShardedClient([a.strip() for a in addresses], **options)


class Client:
    """A client of the replay server at `server_address` ("host:port"): Reverb 0.14's `Client`.

    Reverb's methods, arguments and semantics; this project's extensions are keyword arguments
    (`timeout`s in seconds, `max_in_flight_samples`, the writers' chunking options) and extra
    methods (`sample_stream`, `sample_responses`: the columnar, low-overhead sampling paths;
    `close`). Several servers: `replay.connect` or `replay.ShardedClient`.

    Args:
      server_address: "host:port" of the server.
      token: the server's shared access token, if it has one.
      root_certificates: PEM bytes of the CA (or self-signed certificate) to trust; given, the
        client connects over TLS.
      max_message_bytes: the largest message sent or accepted.
      shared_memory: whether this client's writers offer a server on the same host a
        shared-memory ring for their chunk bytes (`replay.shared_ring`; writers of large steps
        only, and only where the server can open it). False sends every byte in the messages.
    """

    def __init__(self, server_address: str, *, token: Optional[str] = None,
                 root_certificates: Optional[Union[bytes, str]] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 shared_memory: bool = shared_ring.DEFAULT_SHARED_MEMORY):
        if not isinstance(server_address, str) or _several_addresses(server_address):
            raise errors.InvalidArgumentError(
                f"Client takes one server address (\"host:port\"), got {server_address!r}; for several "
                "servers use replay.connect(addresses) or replay.ShardedClient(addresses)")
        self._server_address = server_address
        self._token = token
        self._root_certificates = (root_certificates.encode() if isinstance(root_certificates, str)
                                   else root_certificates)
        self.max_message_bytes = int(max_message_bytes)
        self.shared_memory = bool(shared_memory)
        self._lock = threading.Lock()
        self._channel = None
        self._stub = None
        self._insert_stream = self._sample_stream = self._sample_once = None
        self._signatures: Dict[str, Any] = {}
        metadata = [(protocol.PROTOCOL_METADATA_KEY, str(protocol.PROTOCOL_VERSION))]
        if token is not None:
            metadata.append((protocol.TOKEN_METADATA_KEY, token))
        self.metadata = tuple(metadata)

    # -- pickling by address -------------------------------------------------------------

    def __reduce__(self):
        return (_rebuild_client, (self.address, self._token, self._root_certificates, self.max_message_bytes,
                                  self.shared_memory))

    def __repr__(self) -> str:
        return f"Client, server_address={self.address}"

    @property
    def server_address(self) -> str:
        return self._server_address

    @property
    def address(self) -> str:
        """`server_address` (the name the project's own modules use)."""
        return self._server_address

    # -- channel ---------------------------------------------------------------------------

    @property
    def stub(self) -> replay_pb2_grpc.ReplayServiceStub:
        """The generated gRPC stub (created on first use)."""
        if self._stub is None:
            with self._lock:
                if self._stub is None:
                    options = [
                        ("grpc.max_receive_message_length", self.max_message_bytes),
                        ("grpc.max_send_message_length", self.max_message_bytes),
                        ("grpc.keepalive_time_ms", 30_000),
                        ("grpc.keepalive_timeout_ms", 5_000),
                        ("grpc.keepalive_permit_without_calls", 1),
                    ]
                    if self._root_certificates is not None:
                        credentials = grpc.ssl_channel_credentials(root_certificates=self._root_certificates)
                        self._channel = grpc.secure_channel(self.address, credentials, options=options)
                    else:
                        self._channel = grpc.insecure_channel(self.address, options=options)
                    self._stub = replay_pb2_grpc.ReplayServiceStub(self._channel)
                    _CLIENTS_WITH_CHANNELS.add(self)
                    self._insert_stream = self._channel.stream_stream(
                        INSERT_STREAM_METHOD,
                        request_serializer=framing.serialize_insert_request,
                        response_deserializer=replay_pb2.InsertResponse.FromString)
                    self._sample_stream = self._channel.stream_stream(
                        SAMPLE_STREAM_METHOD,
                        request_serializer=replay_pb2.SampleRequest.SerializeToString,
                        response_deserializer=framing.parse_sample_response)
                    # The same method with one request, its credit the whole call's: no request
                    # iterator (gRPC starts a thread per call to drain one).
                    self._sample_once = self._channel.unary_stream(
                        SAMPLE_STREAM_METHOD,
                        request_serializer=replay_pb2.SampleRequest.SerializeToString,
                        response_deserializer=framing.parse_sample_response)
        return self._stub

    @property
    def insert_stream(self):
        """The InsertStream call taking `framing.PackedInsertRequest`s (the writers' path: chunk
        bytes go into the message without extra copies)."""
        self.stub  # noqa: B018 - opens the channel
        return self._insert_stream

    def close(self) -> None:
        """Closes the channel (a later call opens a new one). At interpreter exit the channel
        is only let go: closing it waits for its calls and connectivity watches to end, which
        gRPC's threads, stopped by then, never report (a dataset or stream left open in a
        reference cycle until the last garbage collection hung the process's exit)."""
        with self._lock:
            if self._channel is not None and not sys.is_finalizing():
                self._channel.close()
            self._channel = self._stub = self._insert_stream = self._sample_stream = self._sample_once = None

    def _call(self, method: str, request, what: str, timeout: Optional[float] = None):
        try:
            return getattr(self.stub, method)(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as e:
            raise rpc_errors.translate_rpc_error(e, what) from None

    # -- writing -------------------------------------------------------------------------

    def insert(self, data: Any, priorities: Mapping[str, float], *, timeout: Optional[float] = None) -> None:
        """Inserts one item holding `data` as a trajectory of one step (each column gets a time
        dimension of length 1, as Reverb's) into each table named in `priorities` (table name ->
        priority); returns when the server acked them. The data is sent once however many tables
        get the item.

        `timeout` (seconds; an extension) is the call's gRPC deadline: when it passes (a rate
        limiter blocks the insert), the call is cancelled on the server too and the item is not
        inserted later, so retrying cannot duplicate it. An insert that the server makes in the
        last moments before the deadline is the one exception, as with any RPC: the server makes
        no insert that had to wait once less than 50 ms are left.

        Raises:
          InvalidArgumentError (a ValueError): no tables, or a bad priority; NotFoundError: an
          unknown table; SignatureMismatchError: `data` does not fit a table's signature;
          DeadlineExceededError: not acked within `timeout` seconds; UnavailableError: the server
          cannot be reached.
        """
        if not priorities:
            raise errors.InvalidArgumentError("priorities must contain at least one item")
        if timeout is not None and not timeout > 0:
            raise errors.InvalidArgumentError(f"timeout must be None or a positive number of seconds, got {timeout}")
        from replay.trajectory_writer import TrajectoryColumn, TrajectoryWriter

        writer = TrajectoryWriter(self, num_keep_alive_refs=1, call_timeout=timeout)
        acked = False
        try:
            columns = tree.map_structure(lambda ref: TrajectoryColumn([ref]), writer.append(data))
            for table, priority in priorities.items():
                writer.create_item(table, priority, columns)
            # The call's deadline ends the wait; the extra second only covers its report arriving.
            writer.flush(timeout_ms=None if timeout is None else int((timeout + 1.0) * 1000))
            acked = True
        except errors.DeadlineExceededError as e:
            raise errors.DeadlineExceededError(
                f"inserting into {sorted(priorities)}: not acknowledged within {timeout:g} s, so the server "
                f"cancelled the insert and did not insert the item (a rate limiter may be blocking inserts): "
                f"{e}") from None
        finally:
            writer.close(flush=False, cancel=not acked)

    def writer(self, max_sequence_length: int, delta_encoded: bool = False,
               chunk_length: Optional[int] = None, max_in_flight_items: Optional[int] = 25):
        """Reverb's legacy `Writer`: append steps, create items of the last `num_timesteps`.
        Prefer `trajectory_writer`.

        Raises:
          InvalidArgumentError (a ValueError): max_sequence_length < 1, chunk_length < 1 or
          greater than max_sequence_length, max_in_flight_items < 1.
        """
        if max_sequence_length < 1:
            raise errors.InvalidArgumentError(
                f"max_sequence_length ({max_sequence_length}) must be a positive integer")
        if chunk_length is None:
            chunk_length = min(DEFAULT_LEGACY_CHUNK_LENGTH, max_sequence_length)
        if chunk_length < 1 or chunk_length > max_sequence_length:
            raise errors.InvalidArgumentError(
                f"chunk_length ({chunk_length}) must be a positive integer le to max_sequence_length "
                f"({max_sequence_length})")
        if max_in_flight_items is None:
            max_in_flight_items = UNLIMITED_IN_FLIGHT_ITEMS
        if max_in_flight_items < 1:
            raise errors.InvalidArgumentError(
                f"max_in_flight_items ({max_in_flight_items}) must be a positive integer")
        from replay.writer import Writer

        return Writer(self, max_sequence_length, chunk_length=chunk_length, delta_encoded=delta_encoded,
                      max_in_flight_items=max_in_flight_items)

    def trajectory_writer(self, num_keep_alive_refs: int, *, validate_items: bool = True,
                          get_signature_timeout_ms: Optional[int] = None,
                          chunk_length: Optional[int] = None, delta_encoded: bool = False,
                          max_in_flight_items: Optional[int] = None):
        """Reverb's `TrajectoryWriter` (`replay.trajectory_writer`): append steps, build items
        from any kept-alive cells. With `validate_items`, `create_item` checks items against
        their table's signature (read with `server_info` within `get_signature_timeout_ms`);
        the server checks them too. Extensions: `chunk_length` (steps per chunk; None: a chunk
        closes when an item references it), `delta_encoded`, `max_in_flight_items`
        (unacknowledged items beyond which the writer's calls block; None: sized from the first
        step).

        Raises:
          InvalidArgumentError (a ValueError): num_keep_alive_refs < 1.
        """
        if num_keep_alive_refs < 1:
            raise errors.InvalidArgumentError(
                f"num_keep_alive_refs ({num_keep_alive_refs}) must be a positive integer")
        from replay.trajectory_writer import TrajectoryWriter

        return TrajectoryWriter(self, num_keep_alive_refs, chunk_length=chunk_length, delta_encoded=delta_encoded,
                                max_in_flight_items=max_in_flight_items, validate_items=validate_items,
                                get_signature_timeout_ms=get_signature_timeout_ms)

    def structured_writer(self, configs: Sequence[Any]):
        """A `StructuredWriter` inserting items as `configs` describe (see `structured_writer`).

        Raises:
          InvalidArgumentError (a ValueError): no configs, or an invalid config.
        """
        if not configs:
            raise errors.InvalidArgumentError("At least one config must be provided.")
        from replay.structured_writer import StructuredWriter

        return StructuredWriter(self, configs)

    # -- sampling ------------------------------------------------------------------------

    def sample(self, table: str, num_samples: int = 1, *, emit_timesteps: bool = True,
               unpack_as_table_signature: bool = False, timeout: Optional[float] = None,
               max_in_flight_samples: int = DEFAULT_SAMPLE_IN_FLIGHT) -> Iterator[Any]:
        """A generator of `num_samples` samples of `table` (nothing happens before the first
        `next`).

        With `emit_timesteps` (the default) each sample is a list of `ReplaySample`s, one per
        step of the item (every column split along its first dimension); otherwise one
        `ReplaySample` whose data is the item's columns. Data is the flat list of columns, or
        the table signature's nest with `unpack_as_table_signature` (flat when the table has
        no signature). String columns come as bytes, as Reverb's.

        Extensions: `timeout` (seconds) bounds how long each sample may wait for the table's
        rate limiter, and the whole call (its gRPC deadline is `timeout` +
        SAMPLE_DEADLINE_ALLOWANCE_SECONDS, after which it is cancelled on the server too); None
        waits forever. The server sends up to `max_in_flight_samples` samples ahead of those
        consumed (Reverb's sends one): samples it took but the caller never reads are lost when
        the generator is dropped.

        Raises (when iterated):
          InvalidArgumentError (a ValueError): num_samples < 1; emit_timesteps with columns of
          different lengths or without a time dimension; unpack_as_table_signature for a table
          the server does not have. NotFoundError: unknown table; DeadlineExceededError: the
          rate limiter (or an empty table) kept a sample waiting past `timeout`, or the call
          passed its deadline; UnavailableError: no server; CancelledError: the server stopped.
        """
        if num_samples < 1:
            raise errors.InvalidArgumentError(f"num_samples must be positive, got {num_samples}")
        if timeout is not None and not timeout >= 0:
            raise errors.InvalidArgumentError(f"timeout must be None or a number >= 0 seconds, got {timeout}")
        timeout_ms = -1 if timeout is None else max(0, int(timeout * 1000))
        call_timeout = None if timeout is None else timeout + SAMPLE_DEADLINE_ALLOWANCE_SECONDS
        signature = self._table_signature(table, call_timeout) if unpack_as_table_signature else None
        unflatten = (lambda x: tree.unflatten_as(signature, x)) if signature is not None else None
        responses = self.sample_responses(table, min(max_in_flight_samples, num_samples), timeout_ms,
                                          num_samples, columnar=True, timeout=call_timeout)
        for packed in responses:
            response = packed.response
            infos = list(map(SampleInfo, response.items.keys, response.probabilities, response.table_sizes,
                             response.priorities, response.times_sampled))
            if response.HasField("columns"):
                columns = [replay_sample.as_reverb_column(np.array(column))
                           for column in column_batch.decode_columns(response.columns, len(infos))]
                rows = [[column[i, ...] for column in columns] for i in range(len(infos))]
            else:
                cache: dict = {}
                rows = [[replay_sample.as_reverb_column(column) for column in item.decode(cache)]
                        for item in codec.decode_sample_items(packed)]
            if not emit_timesteps:
                if unflatten is None:
                    yield from map(ReplaySample, infos, rows)
                else:
                    yield from map(ReplaySample, infos, map(unflatten, rows))
                continue
            for info, row in zip(infos, rows):
                yield replay_sample.timesteps(info, row, unflatten)

    def sample_stream(self, table: str, max_in_flight_samples: int = 256, rate_limiter_timeout_ms: int = -1,
                      max_samples: int = -1, timeout: Optional[float] = None,
                      ) -> Iterator[Tuple[Dict[str, np.ndarray], List[Any]]]:
        """The low-overhead sampling path (an extension): yields batches of samples as they arrive.

        Each yield is `(infos, columns)` for the N items of one server response: `infos` maps
        "key", "probability", "table_size", "priority", "times_sampled" to numpy arrays of shape
        [N]; `columns` is the flat list of item columns, each stacked to shape [N, ...] when all N
        items share that column's shape, else a list of N arrays. The server keeps up to
        `max_in_flight_samples` samples in flight; `rate_limiter_timeout_ms` < 0 waits forever;
        `max_samples` < 0 streams until the caller stops iterating; `timeout` (seconds) is the
        whole stream's gRPC deadline (None: none).

        Raises (when iterated): as `sample`.
        """
        for packed in self.sample_responses(table, max_in_flight_samples, rate_limiter_timeout_ms,
                                            max_samples, timeout=timeout):
            response = packed.response
            cache: dict = {}
            decoded = [item.decode(cache) for item in codec.decode_sample_items(packed)]
            info_arrays = {
                "key": np.array(response.items.keys, dtype=np.uint64),
                "probability": np.array(response.probabilities, dtype=np.float64),
                "table_size": np.array(response.table_sizes, dtype=np.int64),
                "priority": np.array(response.priorities, dtype=np.float64),
                "times_sampled": np.array(response.times_sampled, dtype=np.int32),
            }
            columns = []
            for parts in zip(*decoded):
                shapes = {p.shape for p in parts}
                columns.append(np.stack(parts) if len(shapes) == 1 else list(parts))
            yield info_arrays, columns

    def sample_responses(self, table: str, max_in_flight: int, timeout_ms: int = -1,
                         max_samples: int = -1, columnar: bool = False,
                         timeout: Optional[float] = None, ring_bytes: int = 0
                         ) -> Iterator[framing.PackedSampleResponse]:
        """The raw SampleStream responses of `table` (items with their still-compressed chunks,
        whose bytes are views into the received message), granting the server credit as
        samples arrive so that at most `max_in_flight` are requested ahead of consumption. The
        building block of `sample` and `ReplayDataset`. `close()` ends it from another thread.
        With `columnar`, responses whose items allow it carry `response.columns` (one byte
        string per column, see `replay.column_batch.decode_columns`) instead of chunks. `timeout` (seconds) is
        the call's gRPC deadline (None: none); when it passes the call ends on the server too.
        With `ring_bytes` > 0 the stream offers the server a shared-memory ring of that size
        (`replay.shared_ring`): a server on this host then puts the responses' column bytes
        there, and each such response has `release` set, which the caller must call once it
        copied what it needs out of the response's `column_data` views (until then the server
        does not write over them; a response that finds the ring full comes inline).

        Raises (when iterated): InvalidArgumentError for a non-positive budget; the
        `replay.errors` class matching the stream's failure (DeadlineExceededError when
        `timeout_ms` >= 0 passes without a sample, or at the deadline).
        """
        if max_in_flight <= 0:
            raise errors.InvalidArgumentError(f"max_in_flight_samples must be positive, got {max_in_flight}")
        requests: "queue.SimpleQueue" = queue.SimpleQueue()
        granted = max_in_flight if max_samples < 0 else min(max_in_flight, max_samples)
        ring = shared_ring.ClientRing.create(ring_bytes) if ring_bytes > 0 else None
        requests.put(replay_pb2.SampleRequest(table=table, num_samples=granted,
                                              rate_limiter_timeout_ms=timeout_ms,
                                              columnar=columnar,
                                              max_response_bytes=self.max_message_bytes,
                                              ring_name=ring.name if ring is not None else "",
                                              ring_nonce=ring.nonce if ring is not None else b""))
        done = object()

        def releaser(total: int):
            def release():
                requests.put(replay_pb2.SampleRequest(ring_released=total))
            return release

        def request_iterator():
            while True:
                request = requests.get()
                if request is done:
                    return
                yield request

        try:
            self.stub  # noqa: B018 - opens the channel
            if ring is None and 0 <= max_samples <= granted:
                # the first request grants every sample the call wants: nothing follows it
                call = self._sample_once(requests.get(), metadata=self.metadata, timeout=timeout)
            else:
                call = self._sample_stream(request_iterator(), metadata=self.metadata, timeout=timeout)
        except BaseException:
            if ring is not None:
                ring.close()
            raise
        received = 0
        keep_if_finalizing = exit_safety.keep_if_finalizing  # (outlives module globals)
        try:
            for response in call:
                if ring is not None:
                    # The server has opened the ring by now, or never will: its name can go.
                    ring.unlink()
                    if response.response.HasField("ring"):
                        placed = response.response.ring
                        response.column_data = ring.views(placed.offsets, placed.lengths)
                        response.release = releaser(placed.release)
                received += len(response.response.probabilities)
                # Top the credit back up to the budget once a quarter of it was used: requests
                # stay few (one per response at most), and the server does not wait for credit
                # when a response carries much of the budget (at half, streams of 40 kB items,
                # whose 400-item responses hold 40% of a 1,024 budget, waited 18% of the time).
                outstanding = granted - received
                top_up = max_in_flight - outstanding
                if max_samples >= 0:
                    top_up = min(top_up, max_samples - granted)
                if top_up > 0 and outstanding * 4 <= max_in_flight * 3:
                    requests.put(replay_pb2.SampleRequest(num_samples=top_up))
                    granted += top_up
                yield response
                if 0 <= max_samples <= received:
                    return
        except grpc.RpcError as e:
            if (timeout is not None and e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                    and rpc_errors.server_error_class(e) is None):
                raise errors.DeadlineExceededError(
                    f"sampling table {table!r} at {self.address}: the call passed its deadline of "
                    f"{timeout:g} s and was cancelled") from None
            raise rpc_errors.translate_rpc_error(e, f"sampling table {table!r} at {self.address}") from None
        finally:
            requests.put(done)
            if not keep_if_finalizing(call):  # (at exit a cancel waits for gRPC's stopped threads)
                call.cancel()
            if ring is not None:
                ring.close()

    def _table_signature(self, table: str, timeout: Optional[float] = None):
        """The signature (native specs) of `table`, from the cached `server_info`.

        Raises:
          InvalidArgumentError (a ValueError, as Reverb's): the server has no such table.
        """
        if table not in self._signatures:
            self.server_info(timeout=timeout)
        if table not in self._signatures:
            raise errors.InvalidArgumentError(
                f'Could not find table "{table}". The following tables exists: '
                f'{", ".join(self._signatures)}.')
        return self._signatures[table]

    # -- control -------------------------------------------------------------------------

    def mutate_priorities(self, table: str, updates: Optional[Mapping[int, float]] = None,
                          deletes: Optional[Sequence[int]] = None, *, timeout: Optional[float] = None) -> None:
        """Deletes items of `table`, then updates priorities (item key -> priority); unknown
        keys are ignored. `timeout` (seconds) is an extension.

        Raises:
          InvalidArgumentError: a negative, NaN or infinite priority (nothing changes);
          NotFoundError: unknown table; UnavailableError: no server.
        """
        updates = dict(updates or {})
        for key, priority in updates.items():
            validation.check_priority(key, float(priority))
        request = replay_pb2.MutatePrioritiesRequest(
            table=table,
            updates=replay_pb2.PriorityUpdates(keys=list(updates), priorities=list(updates.values())),
            delete_keys=list(deletes or ()))
        self._call("MutatePriorities", request, f"mutating priorities of table {table!r}", timeout)

    def reset(self, table: str, *, timeout: Optional[float] = None) -> None:
        """Removes every item of `table` and resets its rate limiter. `timeout` (seconds) is an
        extension.

        Raises:
          NotFoundError: unknown table; UnavailableError: no server.
        """
        self._call("Reset", replay_pb2.ResetRequest(table=table), f"resetting table {table!r}", timeout)

    def server_info(self, timeout: Optional[float] = None) -> Dict[str, TableInfo]:
        """Table name -> `replay.TableInfo` (Reverb's: current_size, counters, rate limiter,
        selectors, signature). With a `timeout` (seconds) it waits up to that long for an
        answer, also while the server is not up yet. Also refreshes the signatures `sample`
        unpacks with.

        Raises:
          DeadlineExceededError: no answer within `timeout` (ServerUnreachableError, also an
          UnavailableError, when no server could be reached all that time); UnavailableError:
          no server (without a timeout).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            try:
                response = self._call("ServerInfo", replay_pb2.ServerInfoRequest(), "server_info", left)
                break
            except (errors.UnavailableError, errors.DeadlineExceededError) as e:
                if deadline is None:
                    raise
                if time.monotonic() + SERVER_INFO_RETRY_SECONDS >= deadline:
                    cls = (errors.ServerUnreachableError if isinstance(e, errors.UnavailableError)
                           else errors.DeadlineExceededError)
                    raise cls(f"ServerInfo call did not complete within provided timeout of {timeout}s "
                              f"(server {self.address}: {e})") from None
                time.sleep(SERVER_INFO_RETRY_SECONDS)
        out = server_replies.tables_from_server_info(response)
        for name, info in out.items():
            self._signatures[name] = info.signature
        return out

    def checkpoint(self, *, timeout: Optional[float] = None) -> str:
        """Asks the server to write a checkpoint; returns its path (on the server's machine).
        `timeout` (seconds) is an extension.

        Raises:
          FailedPreconditionError: the server has no checkpointer; UnavailableError: no server.
        """
        return self._call("Checkpoint", replay_pb2.CheckpointRequest(), "checkpoint", timeout).path


def _rebuild_client(address, token, root_certificates, max_message_bytes,
                    shared_memory=shared_ring.DEFAULT_SHARED_MEMORY) -> Client:
    return Client(address, token=token, root_certificates=root_certificates,
                  max_message_bytes=max_message_bytes, shared_memory=shared_memory)
