"""The replay server: tables behind a gRPC service (replay.proto), on 127.0.0.1 by default.

On the design map this is the box between the writers (rollout workers) and the readers
(`Client.sample`, `ReplayDataset`). Writers stream packed batches of chunks and items over
InsertStream; the server validates the chunks without decompressing them (checksums and
sizes), stores them in the `ChunkStore`, keeps alive per stream the chunks its writer may still
reference, inserts the items into their tables (blocking on the tables' rate limiters) and acks
the item keys in batches. Samplers stream items out over SampleStream, many items per response
with their chunks still compressed, within the credit the client granted.

Every call is checked for the protocol version and, when the server has one, the access token.
Errors from `replay.errors` travel as their gRPC status code; the exact class name rides along
in the trailing metadata so the client raises the same class. A bad message ends only the call
that sent it: the server keeps serving everyone else and nothing stored changes.
"""
from __future__ import annotations

import concurrent.futures
import concurrent.futures.thread
import hmac
import logging
import threading
import time
import weakref
from typing import Dict, List, Optional, Sequence, Tuple

import grpc

from replay import errors, specs, wire
from replay.chunk_store import ChunkStore
from replay.proto import replay_pb2, replay_pb2_grpc

log = logging.getLogger(__name__)

ERROR_CLASS_METADATA_KEY = "replay-error-class"

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# How often a call blocked on a rate limiter wakes to see whether its client is still there.
_POLL_SECONDS = 0.5
# Rough upper bound of the chunk bytes put in one sample response.
_SAMPLE_RESPONSE_BYTES = 4 * 1024 * 1024
_DEFAULT_SAMPLE_BATCH = 256


# Servers not stopped yet. Python joins every thread pool's workers before it runs atexit
# callbacks, so a server its owner forgot to stop (a script that ends or raises without
# `stop()`) would keep its handler threads, and the process, alive on open client streams.
# This hook runs just before those joins (threading's atexit hooks run last-registered first;
# concurrent.futures registered its join above, on import) and stops such servers.
_servers_to_stop_at_exit: "weakref.WeakSet[Server]" = weakref.WeakSet()


def _stop_servers_at_exit() -> None:
    for server in list(_servers_to_stop_at_exit):
        try:
            server.stop(grace=None)
        except Exception:  # noqa: BLE001 - the process is exiting; stop the others
            log.exception("replay server: error while stopping at exit")


threading._register_atexit(_stop_servers_at_exit)


def _abort(context: grpc.ServicerContext, error: errors.ReplayError):
    code = getattr(grpc.StatusCode, error.grpc_code, grpc.StatusCode.UNKNOWN)
    context.set_trailing_metadata(((ERROR_CLASS_METADATA_KEY, type(error).__name__),))
    context.abort(code, str(error))


class _Servicer(replay_pb2_grpc.ReplayServiceServicer):
    """The RPC handlers. Each converts `ReplayError`s into gRPC statuses."""

    def __init__(self, server: "Server"):
        self._server = server

    # -- plumbing -------------------------------------------------------------------------

    def _check_call(self, context: grpc.ServicerContext) -> None:
        metadata = dict(context.invocation_metadata())
        token = self._server._token
        if token is not None:
            given = metadata.get(wire.TOKEN_METADATA_KEY, "")
            if not hmac.compare_digest(given.encode(), token.encode()):
                raise errors.UnauthenticatedError(
                    "missing or wrong access token; pass the server's token to Client(address, token=...)")
        version = metadata.get(wire.PROTOCOL_METADATA_KEY)
        if version != str(wire.PROTOCOL_VERSION):
            raise errors.FailedPreconditionError(
                f"protocol version mismatch: the client speaks version {version or 'unknown'} and this "
                f"server speaks version {wire.PROTOCOL_VERSION}; install the same replay version on "
                "both sides")

    def _table(self, name: str):
        table = self._server.tables.get(name)
        if table is None:
            raise errors.NotFoundError(
                f"no table named {name!r}; this server has tables {sorted(self._server.tables)}")
        return table

    def _unary(self, handler, request, context):
        try:
            self._check_call(context)
            return handler(request)
        except errors.ReplayError as e:
            _abort(context, e)
        except Exception as e:  # a bug: report it instead of hanging the client
            log.exception("replay server: unexpected error")
            context.abort(grpc.StatusCode.INTERNAL, f"internal server error: {e!r}")

    # -- inserts ----------------------------------------------------------------------------

    def InsertStream(self, request_iterator, context):
        keep_alive: Dict[int, object] = {}
        try:
            self._check_call(context)
            store = self._server.chunk_store

            def resolve(key):
                chunk = keep_alive.get(key)
                if chunk is None:
                    chunk = store.get([key])[0]
                return chunk

            for request in request_iterator:
                if request.chunks.keys:
                    for chunk in store.insert(wire.decode_chunks(request.chunks)):
                        keep_alive[chunk.key] = chunk
                if request.items.keys:
                    pairs = wire.decode_items(request.items, resolve)
                    self._insert(pairs, context)
                    pairs = None
                    yield replay_pb2.InsertResponse(item_keys=request.items.keys)
                for key in request.release_chunk_keys:
                    keep_alive.pop(key, None)
        except errors.ReplayError as e:
            _abort(context, e)
        except Exception as e:
            if context.is_active():
                log.exception("replay server: unexpected error in InsertStream")
                context.abort(grpc.StatusCode.INTERNAL, f"internal server error: {e!r}")
        finally:
            keep_alive.clear()

    def _insert(self, pairs, context) -> None:
        groups = []  # consecutive runs of items for the same table
        for name, item in pairs:
            if not groups or groups[-1][0] != name:
                groups.append((name, []))
            groups[-1][1].append(item)
        tables = [(self._table(name), items) for name, items in groups]
        if len(tables) > 1:
            # Validate everything first so a bad item for one table inserts nothing anywhere.
            for table, items in tables:
                for item in items:
                    item.validate()
                    if table.signature is not None:
                        specs.check_flat_columns(table.signature, item.column_specs(), table.name)
        for table, items in tables:
            self._blocking(lambda timeout: table.insert_many(items, timeout=timeout), context,
                           deadline=None, retry_safe=False)

    # -- samples ----------------------------------------------------------------------------

    def SampleStream(self, request_iterator, context):
        try:
            self._check_call(context)
            credit, table, timeout_ms, max_batch = 0, None, -1, _DEFAULT_SAMPLE_BATCH
            columnar = False
            item_bytes = 0  # running estimate of one item's chunk bytes, to size responses
            requests = iter(request_iterator)
            while True:
                if credit <= 0:
                    request = next(requests, None)
                    if request is None:
                        return
                    if table is None or request.table:
                        table = self._table(request.table)
                    if request.num_samples < 0:
                        raise errors.InvalidArgumentError(
                            f"num_samples must be >= 0, got {request.num_samples}")
                    credit += request.num_samples
                    if request.table:
                        # Credit top-ups name no table and keep the stream's settings.
                        timeout_ms = request.rate_limiter_timeout_ms
                        columnar = request.columnar
                    if request.max_batch_size > 0:
                        max_batch = request.max_batch_size
                    continue
                want = min(credit, max_batch)
                if item_bytes:
                    want = max(1, min(want, _SAMPLE_RESPONSE_BYTES // item_bytes))
                deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000.0
                sampled = self._blocking(lambda timeout: table.sample(want, timeout=timeout), context,
                                         deadline=deadline, retry_safe=True)
                credit -= len(sampled)
                response, nbytes = _sample_response(table.name, sampled, columnar)
                item_bytes = max(1, nbytes // len(sampled))
                # Hold no items while waiting: a cancelled stream must not keep chunks alive.
                sampled = None
                yield response
                response = None
        except errors.ReplayError as e:
            _abort(context, e)
        except Exception as e:
            if context.is_active():
                log.exception("replay server: unexpected error in SampleStream")
                context.abort(grpc.StatusCode.INTERNAL, f"internal server error: {e!r}")

    def _blocking(self, call, context, deadline: Optional[float], retry_safe: bool):
        """Runs `call(timeout)` (a table insert or sample), waking every _POLL_SECONDS to give up
        when the client went away or the server stops, and raising DeadlineExceededError at
        `deadline` (monotonic seconds; None waits forever). A wait with a deadline is one call
        (a client that goes away frees the thread at the deadline at the latest).

        Inserts are not retried after a timeout (a retry could insert an item twice), so they
        wait in one call; they are woken by `Table.close()` when the server stops.
        """
        if not retry_safe:
            return call(None)
        if deadline is not None:
            # One wait, so the table's timeout message states the caller's timeout.
            return call(max(0.0, deadline - time.monotonic()))
        while True:
            try:
                return call(_POLL_SECONDS)
            except errors.DeadlineExceededError:
                if not context.is_active():
                    raise errors.CancelledError("the client went away") from None

    # -- unary calls ------------------------------------------------------------------------

    def MutatePriorities(self, request, context):
        return self._unary(self._mutate_priorities, request, context)

    def _mutate_priorities(self, request):
        table = self._table(request.table)
        keys, priorities = list(request.updates.keys), list(request.updates.priorities)
        if len(keys) != len(priorities):
            raise errors.InvalidArgumentError(
                f"priority update lists {len(keys)} keys but {len(priorities)} priorities")
        for key, priority in zip(keys, priorities):
            wire.check_priority(key, priority)
        table.mutate_priorities(list(zip(keys, priorities)), list(request.delete_keys))
        return replay_pb2.MutatePrioritiesResponse()

    def Reset(self, request, context):
        return self._unary(self._reset, request, context)

    def _reset(self, request):
        self._table(request.table).reset()
        return replay_pb2.ResetResponse()

    def ServerInfo(self, request, context):
        return self._unary(self._server_info, request, context)

    def _server_info(self, request):
        response = replay_pb2.ServerInfoResponse(protocol_version=wire.PROTOCOL_VERSION)
        for table in list(self._server.tables.values()):
            response.tables.append(table_info_to_proto(table))
        return response

    def Checkpoint(self, request, context):
        return self._unary(self._checkpoint, request, context)

    def _checkpoint(self, request):
        return replay_pb2.CheckpointResponse(path=self._server.checkpoint())


def _sample_response(table_name: str, sampled,
                     columnar: bool = False) -> Tuple[wire.PackedSampleResponse, int]:
    """The response carrying `sampled` and the bytes of their data: columnar when asked for and
    the items allow it (`wire.encode_columns`), else with their chunks (chunk bytes outside the
    message)."""
    response = replay_pb2.SampleResponse()
    response.probabilities.extend([s.probability for s in sampled])
    response.table_sizes.extend([s.table_size for s in sampled])
    response.priorities.extend([s.priority for s in sampled])
    response.times_sampled.extend([s.times_sampled for s in sampled])
    if columnar:
        nbytes = wire.encode_columns([s.item for s in sampled], response.columns)
        if nbytes is not None:
            wire.encode_items([(table_name, s.item) for s in sampled], response.items,
                              with_slices=False)
            return wire.PackedSampleResponse(response, []), nbytes
    chunks = {}
    for s in sampled:
        chunks.update(s.item.chunks)
    wire.encode_items([(table_name, s.item) for s in sampled], response.items)
    column_data: List[bytes] = []
    wire.encode_chunks(chunks.values(), response.chunks, column_data)
    return wire.PackedSampleResponse(response, column_data), sum(c.nbytes for c in chunks.values())


def _method_handlers(servicer: "_Servicer") -> dict:
    """The service's generated method handlers, with SampleStream sending
    `wire.PackedSampleResponse`s (its chunk bytes are never copied into a protobuf object)."""

    class _Recorder:
        def __init__(self):
            self.handlers = {}

        def add_generic_rpc_handlers(self, handlers):
            pass

        def add_registered_method_handlers(self, service, handlers):
            self.handlers.update(handlers)

    recorder = _Recorder()
    replay_pb2_grpc.add_ReplayServiceServicer_to_server(servicer, recorder)
    methods = {m.name for m in replay_pb2.DESCRIPTOR.services_by_name["ReplayService"].methods}
    if set(recorder.handlers) != methods:
        raise RuntimeError("replay/proto/replay_pb2_grpc.py does not register every method of "
                           "replay.proto; regenerate it with tools/gen_proto.py")
    recorder.handlers["SampleStream"] = grpc.stream_stream_rpc_method_handler(
        servicer.SampleStream, request_deserializer=replay_pb2.SampleRequest.FromString,
        response_serializer=wire.serialize_sample_response)
    return recorder.handlers


def table_info_to_proto(table) -> replay_pb2.TableInfo:
    """A table's `info()` and `config()` as the ServerInfo message carries them."""
    info = table.info()
    return replay_pb2.TableInfo(
        name=info.name, size=info.size, max_size=info.max_size,
        max_times_sampled=info.max_times_sampled, num_inserts=info.num_inserts,
        num_samples=info.num_samples, num_deletes=info.num_deletes, num_evictions=info.num_evictions,
        config_json=wire.json_dumps(table.config()),
        rate_limiter_info_json=wire.json_dumps(info.rate_limiter_info),
        extensions_info_json=wire.json_dumps(info.extensions))


class Server:
    """Serves `tables` over gRPC.

    Args:
      tables: the `Table`s to serve (names must be unique).
      port: the port to listen on; None picks a free one (read it from `.port`).
      checkpointer: a `Checkpointer`; when given, the latest complete checkpoint in its
        directory is loaded at start (its tables replace the same-named `tables`; tables only in
        the checkpoint are ignored with a warning) and `Client.checkpoint()` writes new ones.
      host: the interface to listen on; 127.0.0.1 unless you mean to serve other machines.
      token: a shared secret every call must carry (see `Client(token=...)`); None for none.
      tls_certificate, tls_private_key: PEM bytes (or str) to serve over TLS.
      max_workers: threads serving calls; every open stream holds one.
      max_message_bytes: the largest message accepted or sent; larger ones are refused with
        RESOURCE_EXHAUSTED.

    Raises:
      InvalidArgumentError: duplicate table names, or only one of certificate and key.
      UnavailableError: the port cannot be bound.
    """

    def __init__(self, tables: Sequence, port: Optional[int] = None, checkpointer=None,
                 host: str = "127.0.0.1", *, token: Optional[str] = None,
                 tls_certificate: Optional[bytes] = None, tls_private_key: Optional[bytes] = None,
                 max_workers: int = 64, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        names = [t.name for t in tables]
        if len(set(names)) != len(names):
            raise errors.InvalidArgumentError(f"table names must be unique, got {names}")
        if (tls_certificate is None) != (tls_private_key is None):
            raise errors.InvalidArgumentError("TLS needs both a certificate and a private key")
        self.tables = {t.name: t for t in tables}
        self.chunk_store = ChunkStore()
        self.checkpointer = checkpointer
        self.host = host
        self._token = token
        self._tls_certificate = _as_bytes(tls_certificate)
        self._checkpoint_lock = threading.Lock()
        if checkpointer is not None:
            self._restore(checkpointer)
        self.max_message_bytes = int(max_message_bytes)
        options = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.so_reuseport", 0),
            # Clients ping every 30 s to notice dead connections; allow it (gRPC's default policy
            # answers pings more often than every 5 minutes with GOAWAY "too_many_pings").
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
        ]
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="replay-server")
        self._grpc_server = grpc.server(self._executor, options=options)
        handlers = _method_handlers(_Servicer(self))
        self._grpc_server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(wire.SERVICE_NAME, handlers),))
        self._grpc_server.add_registered_method_handlers(wire.SERVICE_NAME, handlers)
        address = f"{host}:{0 if port is None else int(port)}"
        try:
            if self._tls_certificate is not None:
                credentials = grpc.ssl_server_credentials(
                    [(_as_bytes(tls_private_key), self._tls_certificate)])
                self.port = self._grpc_server.add_secure_port(address, credentials)
            else:
                self.port = self._grpc_server.add_insecure_port(address)
        except RuntimeError as e:
            raise errors.UnavailableError(f"cannot listen on {address}: {e}") from e
        if self.port == 0:
            raise errors.UnavailableError(f"cannot listen on {address} (port in use?)")
        self._stopped = threading.Event()
        self._grpc_server.start()
        _servers_to_stop_at_exit.add(self)
        log.info("replay server listening on %s:%d with tables %s", host, self.port, sorted(self.tables))

    def _restore(self, checkpointer) -> None:
        restored = checkpointer.load_latest()
        if restored is None:
            return
        for table in restored:
            if table.name in self.tables:
                self.tables[table.name] = table
            else:
                log.warning("checkpoint table %r is not served (not among the given tables); ignored",
                            table.name)

    @property
    def address(self) -> str:
        return f"{'localhost' if self.host in ('127.0.0.1', 'localhost') else self.host}:{self.port}"

    def checkpoint(self) -> str:
        """Writes a checkpoint through the checkpointer and returns its path.

        Raises:
          FailedPreconditionError: the server has no checkpointer.
        """
        if self.checkpointer is None:
            raise errors.FailedPreconditionError(
                "this server has no checkpointer; start it with Server(..., checkpointer=Checkpointer(dir))")
        with self._checkpoint_lock:
            return self.checkpointer.save(list(self.tables.values()))

    def localhost_client(self, **kwargs):
        """A `Client` of this server (with its token and TLS certificate)."""
        from replay.client import Client

        kwargs.setdefault("token", self._token)
        if self._tls_certificate is not None:
            kwargs.setdefault("root_certificates", self._tls_certificate)
        return Client(f"localhost:{self.port}", **kwargs)

    def stop(self, grace: Optional[float] = 1.0) -> None:
        """Stops serving: calls waiting on a rate limiter end with CANCELLED. Idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        for table in self.tables.values():
            table.close()
        self._grpc_server.stop(grace).wait()
        self._executor.shutdown(wait=False)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the server stops (or `timeout` passes); True when it stopped."""
        return self._grpc_server.wait_for_termination(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            if not self._stopped.is_set():
                self._grpc_server.stop(None)
        except Exception:
            pass


def _as_bytes(value) -> Optional[bytes]:
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else bytes(value)
