"""The replay server: tables behind a gRPC service (replay.proto), on 127.0.0.1 by default.

This is the box between the writers (rollout workers) and the readers
(`Client.sample`, `ReplayDataset`). Writers stream packed batches of chunks and items over
InsertStream; the server validates the chunks without decompressing them (checksums and
sizes), stores them in the `ChunkStore`, keeps alive per stream the chunks its writer may still
reference, inserts the items into their tables (waiting for the tables' rate limiters) and acks
the item keys in batches. Samplers stream items out over SampleStream, many items per response
with their chunks still compressed, within the credit the client granted.
See docs/architecture.md, "Inside the replay server" and "Processes and threads".

Concurrency: the calls run as coroutines of grpc's asyncio server on one event loop, in a thread
of its own; no thread is tied to a stream, so thousands of open streams cost only memory. A call
that waits for a rate limiter does not block anything: it asks the table without waiting
(`Table.try_insert_many`, `Table.try_sample`) and, when refused, awaits the table's change
signal (`Table.add_change_listener`). A call the client cancels or lets time out is cancelled
at its next wait, so an insert whose client gave up never lands later. The streams' steps of
work (storing and inserting one message, taking and encoding one sample response) run in
arrival order from one queue in short slices of the loop (`server_scheduling.WorkQueue`), so a burst on many
streams cannot delay new calls or `server_info` by more than a slice. Work that may block for
long (checkpoints, and decoding very large messages) runs in a small thread pool.

Limits (constructor arguments, `replay-server` flags): the largest message, the most items per
sample response, the most concurrent streams, and the most chunk bytes one insert stream may
hold. A call over a limit ends with RESOURCE_EXHAUSTED or INVALID_ARGUMENT naming the limit;
everyone else keeps being served.

Every call is checked for the protocol version and, when the server has one, the access token.
Errors from `replay.errors` travel as their gRPC status code; the exact class name rides along
in the trailing metadata so the client raises the same class. A bad message ends only the call
that sent it: the server keeps serving everyone else and nothing stored changes.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import ipaddress
import logging
import threading
import weakref
from typing import Dict, List, Optional, Sequence

import grpc

from replay import errors, framing, gc_freeze, heap_policy, protocol, validation
from replay.chunk_store import ChunkStore
from replay.disk_chunk_store import DiskChunkStore
from replay.gc_freeze import GcFreezer
from replay.insert_service import InsertService
from replay.proto import replay_pb2, replay_pb2_grpc
from replay.sample_service import SampleService
from replay.server_calls import check_request, end_failed_call, tolerant_deserializer
from replay.server_scheduling import InsertLine, TableSignals, WorkQueue

log = logging.getLogger(__name__)


DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_SAMPLE_BATCH_SIZE = 4096
DEFAULT_MAX_CONCURRENT_STREAMS = 1024
DEFAULT_MAX_IN_FLIGHT_BYTES_PER_STREAM = 256 * 1024 * 1024
DEFAULT_MAX_WORKERS = 4
# gRPC grows a stream's receive window by probing the bandwidth-delay product with pings as data
# arrives. On loopback the delay is microseconds: the probes find nothing to grow for, and the
# window they grow lets busy writers queue megabytes the server has yet to take up, taking CPU
# the server needs. With HTTP/2's fixed 64 KiB window instead, sixteen writers of 100 B steps
# (2 cores) went from 58k to 73k items/s; datasets, samples and large inserts were unchanged
# (docs/benchmarks.md). None: probe only when listening beyond loopback.
DEFAULT_TUNE_RECEIVE_WINDOW = None


def _is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 possibly in brackets) is this machine's
    loopback interface."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Servicer(InsertService, SampleService, replay_pb2_grpc.ReplayServiceServicer):
    """The RPC handlers (coroutines on the server's event loop): InsertStream
    (`InsertService`), SampleStream (`SampleService`) and the unary calls here. Each converts
    `ReplayError`s into gRPC statuses."""

    def __init__(self, server: "Server"):
        self._server = server
        self._signals: Dict[int, TableSignals] = {}
        self._insert_lines: Dict[int, InsertLine] = {}
        self.open_streams = 0
        self._work: Optional[WorkQueue] = None

    def start(self) -> None:
        """Called on the event loop's thread before serving."""
        self._work = WorkQueue()
        self.start_inserts()

    def stop(self) -> None:
        if self._work is not None:
            self._work.stop()

    def watch(self, table, loop) -> None:
        """Registers the change signal of `table` (on the event loop's thread)."""
        signals = TableSignals(loop)
        self._signals[id(table)] = signals
        self._insert_lines[id(table)] = InsertLine()
        table.add_change_listener(signals.on_change)

    def unwatch(self, table) -> None:
        signals = self._signals.pop(id(table), None)
        self._insert_lines.pop(id(table), None)
        if signals is not None:
            table.remove_change_listener(signals.on_change)

    # -- plumbing -------------------------------------------------------------------------

    def _check_call(self, context) -> None:
        metadata = dict(context.invocation_metadata() or ())
        token = self._server._token  # noqa: SLF001 - the service and its server share this module
        if token is not None:
            given = metadata.get(protocol.TOKEN_METADATA_KEY, "")
            if not isinstance(given, str) or not hmac.compare_digest(given.encode(), token.encode()):
                raise errors.UnauthenticatedError(
                    "missing or wrong access token; pass the server's token to Client(address, token=...)")
        version = metadata.get(protocol.PROTOCOL_METADATA_KEY)
        if version != str(protocol.PROTOCOL_VERSION):
            raise errors.FailedPreconditionError(
                f"protocol version mismatch: the client speaks version {version or 'unknown'} and this "
                f"server speaks version {protocol.PROTOCOL_VERSION}; install the same replay version on "
                "both sides")

    def _table(self, name: str):
        table = self._server.tables.get(name)
        if table is None:
            raise errors.NotFoundError(
                f"no table named {name!r}; this server has tables {sorted(self._server.tables)}")
        return table

    def _open_stream(self) -> None:
        limit = self._server.max_concurrent_streams
        if self.open_streams >= limit:
            raise errors.ResourceExhaustedError(
                f"the server already serves {self.open_streams} streams, its max_concurrent_streams "
                f"limit ({limit}); close idle writers and samplers, or start the server with a higher "
                "max_concurrent_streams (replay-server --max-concurrent-streams)")
        self.open_streams += 1

    async def _unary(self, handler, request, context):
        try:
            self._check_call(context)
            check_request(request)
            return handler(request)
        except Exception as e:  # noqa: BLE001 - a named status, or INTERNAL with the traceback logged
            await end_failed_call(context, e, type(request).__name__)

    # -- unary calls ------------------------------------------------------------------------

    async def MutatePriorities(self, request, context):
        return await self._unary(self._mutate_priorities, request, context)

    def _mutate_priorities(self, request):
        table = self._table(request.table)
        keys, priorities = list(request.updates.keys), list(request.updates.priorities)
        if len(keys) != len(priorities):
            raise errors.InvalidArgumentError(
                f"priority update lists {len(keys)} keys but {len(priorities)} priorities")
        for key, priority in zip(keys, priorities):
            validation.check_priority(key, priority)
        table.mutate_priorities(list(zip(keys, priorities)), list(request.delete_keys))
        return replay_pb2.MutatePrioritiesResponse()

    async def Reset(self, request, context):
        return await self._unary(self._reset, request, context)

    def _reset(self, request):
        self._table(request.table).reset()
        return replay_pb2.ResetResponse()

    async def ServerInfo(self, request, context):
        return await self._unary(self._server_info, request, context)

    def _server_info(self, request):
        response = replay_pb2.ServerInfoResponse(protocol_version=protocol.PROTOCOL_VERSION)
        for table in list(self._server.tables.values()):
            response.tables.append(table_info_to_proto(table))
        return response

    def _tables_response(self) -> replay_pb2.InsertResponse:
        """An insert stream's first response to a writer that asked for the tables."""
        return replay_pb2.InsertResponse(server_info=self._server_info(None))

    async def Checkpoint(self, request, context):
        try:
            self._check_call(context)
            check_request(request)
            # Writing files can take long: in the pool, so the event loop keeps serving.
            path = await asyncio.get_running_loop().run_in_executor(
                self._server._executor, self._server.checkpoint)  # noqa: SLF001 - same module
            return replay_pb2.CheckpointResponse(path=path)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as e:  # noqa: BLE001 - a named status, or INTERNAL with the traceback logged
            await end_failed_call(context, e, "Checkpoint")


def _already_serialized(data: bytes) -> bytes:
    """SampleStream's response serializer: its producer task serializes each response
    (`framing.serialize_sample_response`) while the previous one is sent."""
    return data


def _method_handlers(servicer: "_Servicer") -> dict:
    """The service's generated method handlers, with SampleStream sending the bytes its
    producer serialized (`framing.serialize_sample_response`: chunk bytes are never copied into
    a protobuf object) and InsertStream reading its chunk bytes apart from the message
    (`framing.parse_insert_request`)."""

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
        response_serializer=_already_serialized)
    recorder.handlers["InsertStream"] = recorder.handlers["InsertStream"]._replace(
        request_deserializer=framing.parse_insert_request)
    return {name: handler._replace(request_deserializer=tolerant_deserializer(
                name, handler.request_deserializer))
            for name, handler in recorder.handlers.items()}


def table_info_to_proto(table) -> replay_pb2.TableInfo:
    """A table's `info()` and `config()` as the ServerInfo message carries them."""
    info = table.info()
    return replay_pb2.TableInfo(
        name=info.name, size=info.size, max_size=info.max_size,
        max_times_sampled=info.max_times_sampled, num_inserts=info.num_inserts,
        num_samples=info.num_samples, num_deletes=info.num_deletes, num_evictions=info.num_evictions,
        config_json=protocol.json_dumps(table.config()),
        # Table counters the message has no field for travel with the rate limiter's.
        rate_limiter_info_json=protocol.json_dumps(dict(
            info.rate_limiter_info, table_num_unique_samples=info.num_unique_samples,
            table_num_updates=info.num_updates, table_num_episodes=info.num_episodes,
            table_num_deleted_episodes=info.num_deleted_episodes)),
        extensions_info_json=protocol.json_dumps(info.extensions))


_LIVE_SERVERS: "weakref.WeakSet[Server]" = weakref.WeakSet()


def _stop_live_servers() -> None:
    # A server its owner forgot to stop (a script that ends or raises without `stop()`): an event
    # loop thread still serving at interpreter exit would die mid-call, and its thread pool's
    # busy workers would keep the process alive.
    for server in list(_LIVE_SERVERS):
        try:
            server.stop(grace=None)
        except Exception:  # noqa: BLE001 - the process is exiting; stop the others
            log.exception("replay server: error while stopping at exit")


# Python joins thread pools' workers before it runs atexit callbacks; threading's own exit
# hooks run before those joins (last registered first, and concurrent.futures registered its
# join when it was imported above).
threading._register_atexit(_stop_live_servers)  # noqa: SLF001 - see above


def _positive_limit(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


class Server:
    """Serves `tables` over gRPC.

    Args:
      tables: the `Table`s to serve (at least one; names must be unique).
      port: the port to listen on; None picks a free one (read it from `.port`).
      checkpointer: a `Checkpointer` (or Reverb's `checkpointers.DefaultCheckpointer`); when
        given, the latest complete checkpoint in its directory is loaded at start into the
        same-named `tables`, whose settings win
        (`replay.checkpoint.RESTORE_RULE`; tables only in the checkpoint are ignored with a
        warning), within the checkpointer's `restore_timeout`; `Client.checkpoint()` writes new ones.
      host: the interface to listen on; 127.0.0.1 unless you mean to serve other machines.
      token: a shared secret every call must carry (see `Client(token=...)`); None for none.
      tls_certificate, tls_private_key: PEM bytes (or str) to serve over TLS.
      max_workers: threads for work that must not run on the event loop (checkpoints, decoding
        very large messages). Streams do not hold threads.
      max_message_bytes: the largest message accepted or sent; larger ones are refused with
        RESOURCE_EXHAUSTED.
      max_sample_batch_size: the most items a sampler may ask for in one response (its
        `max_batch_size`); more is refused with INVALID_ARGUMENT.
      max_concurrent_streams: the most insert and sample streams open at once; one more is
        refused with RESOURCE_EXHAUSTED (unary calls such as `server_info` are always served).
      max_in_flight_bytes_per_stream: the most chunk bytes one insert stream may keep alive for
        its writer (chunks sent and not yet released), and the target size of a sample
        response; an insert stream going over it ends with RESOURCE_EXHAUSTED.
      freeze_gc: run the garbage-collection policy of `replay.gc_freeze` (every second and after
        every insert message, the objects alive leave the collector's view; no automatic full
        collections, one full collection once a minute). It spares the server the collector's
        walks over every stored item, a quarter to a half of its CPU time under fast inserts of
        small items. It changes the collector of the whole process (cyclic garbage of other
        code may wait up to a minute to be freed); False leaves the collector alone, for a
        process whose other work makes much cyclic garbage.
      keep_freed_heap_memory: apply `replay.heap_policy` to this process (the megabyte sample
        responses reuse freed memory instead of faulting it in again); process-wide too (up to
        256 MB of freed memory stays with the process); False leaves the allocator alone.
      chunk_dir: a directory on local disk for the chunk data (`replay.disk_chunk_store`): the
        tables may then hold many times the server's memory, the page cache keeping the hot
        chunks; None keeps chunks in memory. Checkpoints then link the chunk files instead of
        copying the bytes where the checkpoint directory is on the same filesystem, and a
        restore maps them (`replay.checkpoint_chunk_refs`).
      chunk_cache_bytes: with `chunk_dir`, the most chunk bytes the server process keeps mapped
        in its memory (the store drops its files' pages once they grew past it; see
        `replay.disk_chunk_store`); None: the kernel's page cache alone decides.
      tune_receive_window: let gRPC grow each connection's receive window by probing the
        bandwidth-delay product (writers far away need a window larger than 64 KiB to keep
        their link full); False keeps HTTP/2's 64 KiB. None: True unless `host` is a loopback
        address, where the probes cost the server CPU and gain nothing.

    Raises:
      ChunkDirError: `chunk_dir` is not a writable directory.
      InvalidArgumentError: no tables, duplicate table names, only one of certificate and key, a limit
        that is not a positive integer, `chunk_cache_bytes` without `chunk_dir`, or checkpoint
        items that do not fit a declared signature.
      UnavailableError: the port cannot be bound.
      CorruptCheckpointError, DeadlineExceededError: no checkpoint could be restored, or the
        restore ran past its timeout (nothing is served then; the checkpoints are unchanged).
    """

    def __init__(self, tables: Optional[Sequence] = None, port: Optional[int] = None, checkpointer=None,
                 host: str = "127.0.0.1", *, token: Optional[str] = None,
                 tls_certificate: Optional[bytes] = None, tls_private_key: Optional[bytes] = None,
                 max_workers: int = DEFAULT_MAX_WORKERS, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_sample_batch_size: int = DEFAULT_MAX_SAMPLE_BATCH_SIZE,
                 max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS,
                 max_in_flight_bytes_per_stream: int = DEFAULT_MAX_IN_FLIGHT_BYTES_PER_STREAM,
                 freeze_gc: bool = gc_freeze.DEFAULT_FREEZE_GC,
                 keep_freed_heap_memory: bool = heap_policy.DEFAULT_KEEP_FREED_HEAP_MEMORY,
                 chunk_dir: Optional[str] = None, chunk_cache_bytes: Optional[int] = None,
                 tune_receive_window: Optional[bool] = DEFAULT_TUNE_RECEIVE_WINDOW):
        if keep_freed_heap_memory:
            heap_policy.keep_freed_heap_memory()
        self._stopped = threading.Event()
        self._freeze_gc = bool(freeze_gc)
        self._gc_freezer: Optional[GcFreezer] = None
        self._terminated = threading.Event()
        if not tables:
            raise errors.InvalidArgumentError("a server needs at least one table; pass tables=[Table(...)]")
        if checkpointer is not None and hasattr(checkpointer, "internal_checkpointer"):
            checkpointer = checkpointer.internal_checkpointer()  # Reverb's checkpointer classes
        names = [t.name for t in tables]
        if len(set(names)) != len(names):
            raise errors.InvalidArgumentError(f"table names must be unique, got {names}")
        if (tls_certificate is None) != (tls_private_key is None):
            raise errors.InvalidArgumentError("TLS needs both a certificate and a private key")
        self.max_message_bytes = _positive_limit("max_message_bytes", max_message_bytes)
        self.max_sample_batch_size = _positive_limit("max_sample_batch_size", max_sample_batch_size)
        self.max_concurrent_streams = _positive_limit("max_concurrent_streams", max_concurrent_streams)
        self.max_in_flight_bytes_per_stream = _positive_limit(
            "max_in_flight_bytes_per_stream", max_in_flight_bytes_per_stream)
        max_workers = _positive_limit("max_workers", max_workers)
        self.tables = {t.name: t for t in tables}
        if chunk_cache_bytes is not None:
            if chunk_dir is None:
                raise errors.InvalidArgumentError(
                    "chunk_cache_bytes bounds the memory of disk-backed chunks; pass chunk_dir too")
            chunk_cache_bytes = _positive_limit("chunk_cache_bytes", chunk_cache_bytes)
        self.chunk_store = (ChunkStore() if chunk_dir is None
                            else DiskChunkStore(chunk_dir, cache_bytes=chunk_cache_bytes))
        self.checkpointer = checkpointer
        self.host = host
        self.tune_receive_window = (not _is_loopback(host) if tune_receive_window is None
                                    else bool(tune_receive_window))
        self._token = token
        self._tls_certificate = _as_bytes(tls_certificate)
        self._tls_private_key = _as_bytes(tls_private_key)
        self._checkpoint_lock = threading.Lock()
        if checkpointer is not None:
            self._restore(checkpointer)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="replay-server-pool")
        self._servicer = _Servicer(self)
        self._loop = asyncio.new_event_loop()
        self._grpc_server = None
        self.port = 0
        started = threading.Event()
        failure: List[BaseException] = []
        self._thread = threading.Thread(target=self._serve, args=(f"{host}:{0 if port is None else int(port)}",
                                                                  started, failure),
                                        name="replay-server", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._executor.shutdown(wait=False)
            self._stopped.set()
            raise failure[0]
        _LIVE_SERVERS.add(self)
        log.info("replay server listening on %s:%d with tables %s", host, self.port, sorted(self.tables))

    # -- the event loop thread ----------------------------------------------------------------

    def _serve(self, address: str, started: threading.Event, failure: list) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start(address))
        except BaseException as e:  # noqa: BLE001 - reported by the constructor
            failure.append(e)
            started.set()
            loop.close()
            self._terminated.set()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self._terminated.set()

    async def _start(self, address: str) -> None:
        options = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.so_reuseport", 0),
            # Clients ping every 30 s to notice dead connections; allow it (gRPC's default policy
            # answers pings more often than every 5 minutes with GOAWAY "too_many_pings").
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
            ("grpc.http2.max_ping_strikes", 0),
            # gRPC cancels a call the server has not taken up within 30 s; a saturated server
            # takes up new streams late, and a late writer should wait, not fail.
            ("grpc.server_max_unrequested_time_in_server", 3600),
            ("grpc.http2.bdp_probe", int(self.tune_receive_window)),
        ]
        server = grpc.aio.server(options=options)
        handlers = _method_handlers(self._servicer)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(protocol.SERVICE_NAME, handlers),))
        server.add_registered_method_handlers(protocol.SERVICE_NAME, handlers)
        try:
            if self._tls_certificate is not None:
                credentials = grpc.ssl_server_credentials([(self._tls_private_key, self._tls_certificate)])
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as e:
            raise errors.UnavailableError(f"cannot listen on {address}: {e}") from e
        if port == 0:
            raise errors.UnavailableError(f"cannot listen on {address} (port in use?)")
        loop = asyncio.get_running_loop()
        self._servicer.start()
        for table in self.tables.values():
            self._servicer.watch(table, loop)
        await server.start()
        self._grpc_server = server
        self.port = port
        if self._freeze_gc:
            self._gc_freezer = GcFreezer(loop)
            self._gc_freezer.start()

    # -- public API ---------------------------------------------------------------------------

    def _restore(self, checkpointer) -> None:
        # The declared tables' settings win over the checkpoint's (replay.checkpoint.RESTORE_RULE).
        # A disk-backed server maps the chunk files of a checkpoint that references them
        # (replay.checkpoint_chunk_refs) and moves the chunks of one that copied them to disk.
        on_disk = isinstance(self.chunk_store, DiskChunkStore)
        declared = {name: t.config() for name, t in self.tables.items()}
        restored = (checkpointer.load_latest(declared=declared, map_chunk_files=True) if on_disk
                    else checkpointer.load_latest(declared=declared))
        for table in restored or ():
            self.tables[table.name] = table
            if on_disk:
                _, items, _ = table.checkpoint()
                chunks = {key: chunk for item in items for key, chunk in item.chunks.items()}.values()
                self.chunk_store.store_on_disk(chunks)
                self.chunk_store.adopt_mapped(chunks)

    @property
    def address(self) -> str:
        return f"{'localhost' if self.host in ('127.0.0.1', 'localhost') else self.host}:{self.port}"

    def checkpoint(self) -> str:
        """Writes a checkpoint through the checkpointer and returns its path (with a chunk
        directory, one that links the chunk files instead of copying them, where it can:
        `replay.checkpoint`).

        Raises:
          FailedPreconditionError: the server has no checkpointer.
          OSError: the checkpoint cannot be written.
        """
        if self.checkpointer is None:
            raise errors.FailedPreconditionError(
                "this server has no checkpointer; start it with Server(..., checkpointer=Checkpointer(dir))")
        with self._checkpoint_lock:
            if isinstance(self.chunk_store, DiskChunkStore):  # links the chunk files, no copy
                return self.checkpointer.save(list(self.tables.values()), reference_chunk_files=True)
            return self.checkpointer.save(list(self.tables.values()))

    def localhost_client(self, **kwargs):
        """A `Client` of this server (with its token and TLS certificate)."""
        from replay.client import Client

        kwargs.setdefault("token", self._token)
        if self._tls_certificate is not None:
            kwargs.setdefault("root_certificates", self._tls_certificate)
        return Client(f"localhost:{self.port}", **kwargs)

    def stop(self, grace: Optional[float] = 1.0) -> None:
        """Stops serving: calls waiting on a rate limiter end with CANCELLED, other calls get
        `grace` seconds to finish (None: none). Idempotent.

        Raises:
          RuntimeError: called from one of the server's own calls (it would wait for itself).
        """
        if self._stopped.is_set():
            return
        if threading.current_thread() is self._thread:
            raise RuntimeError("Server.stop() cannot be called from the server's own event loop")
        self._stopped.set()
        _LIVE_SERVERS.discard(self)
        for table in self.tables.values():
            table.close()
        loop = self._loop
        try:
            asyncio.run_coroutine_threadsafe(self._grpc_server.stop(grace), loop).result(
                timeout=(grace or 0.0) + 30.0)
        except Exception:
            log.exception("replay server: stopping the gRPC server failed")
        try:
            asyncio.run_coroutine_threadsafe(self._unwatch_all(), loop).result(timeout=30.0)
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:  # the loop already ended
            pass
        self._thread.join(timeout=30.0)
        self._executor.shutdown(wait=False)
        self.chunk_store.close()

    async def _unwatch_all(self) -> None:
        if self._gc_freezer is not None:
            self._gc_freezer.stop()
        self._servicer.stop()
        for table in self.tables.values():
            self._servicer.unwatch(table)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the server stops (or `timeout` passes); True when it stopped."""
        return self._terminated.wait(timeout)

    def __repr__(self) -> str:
        return f"Server(port={self.port})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _as_bytes(value) -> Optional[bytes]:
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else bytes(value)
