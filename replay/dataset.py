"""ReplayDataset: a tf.data pipeline that streams samples from replay servers.

This sits between `replay.Server` and the learner: it is the only module of
`replay` that imports TensorFlow. Each worker is one SampleStream call whose responses, many
items each, are read on a reader thread (so gRPC keeps receiving while the worker decodes) with
their chunk bytes left as views into the received message; the worker copies each item once,
from there into one numpy array per column, and tf.data adopts large blocks without another
copy. tf.data then splits these blocks into items in C++ (`unbatch`), so a following
`.batch(n)` pays no per-item Python cost. Several workers per iterator run in parallel
(`interleave`), each keeping up to `max_in_flight_samples_per_worker` samples in flight on the
server side, which is the prefetch budget. Responses the fast path cannot take (items spanning
several chunks, delta-encoded columns, items of different shapes) are decoded item by item
through the replay data model.
See docs/architecture.md, "Data path" and "Processes and threads".

`ReplayDataset` is a `tf.data.Dataset` subclass (as Reverb's): it builds that pipeline and
takes on its variant tensor, so `isinstance(ds, tf.data.Dataset)` holds and every tf.data
transformation, `tf.distribute` input function and `tf.function` loop accepts it. It owns its
streams: `ds.metrics` (`StreamMetrics`) counts per server and `ds.close()` ends every stream,
including those of pipelines built on it (`ds.batch(32)` returns a plain dataset, so keep `ds`).

Given several server addresses the dataset merges their streams (each server gets its own
workers; blocks come out in the order they are ready). A server that dies ends its streams
only: the failure is logged and counted in the metrics and the dataset keeps reading from the
other servers. With a single address a dead server is an error of the dataset, as in Reverb.
A stream that breaks after delivering samples (for example a dropped connection) is reopened;
only a stream that fails before delivering any sample counts as the server's failure.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence, Union

import lz4.block
import numpy as np
import tensorflow as tf
import tree

from replay import codec, column_batch, errors, framing, heap_policy, specs
from replay.client import Client
from replay.replay_sample import ReplaySample, SampleInfo

log = logging.getLogger(__name__)

INFO_DTYPES = SampleInfo(key=tf.uint64, probability=tf.float64, table_size=tf.int64,
                         priority=tf.float64, times_sampled=tf.int32)
"""The dtype of each SampleInfo field in dataset elements (Reverb's choice)."""

# Streams per server when num_workers_per_iterator is -1. One stream already keeps its whole
# in-flight budget requested; on a 2-core machine a second stream only adds GIL contention
# (measured with tools/bench_replay.py --dataset --dataset-workers 1 and 2: 85k vs 76k items/s at
# 400 B, 17.0k vs 15.7k at 40 kB).
_DEFAULT_WORKERS = 1
# Items at least this large are copied row by row into pooled aligned arrays instead of one
# bytes.join per block.
_LARGE_ITEM_BYTES = 16 * 1024


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


def _as_addresses(server_address: Union[str, Sequence[str]]) -> List[str]:
    addresses = [server_address] if isinstance(server_address, str) else list(server_address)
    if not addresses or not all(isinstance(a, str) and a for a in addresses):
        raise errors.InvalidArgumentError(
            f"server_address must be a 'host:port' string or a non-empty list of them, got "
            f"{server_address!r}")
    return addresses


def _block_signature(dtypes: Any, shapes: Any):
    info = SampleInfo(*[tf.TensorSpec([None], d) for d in INFO_DTYPES])
    data = tree.map_structure_up_to(
        dtypes, lambda d, s: tf.TensorSpec(tf.TensorShape([None]).concatenate(s), d), dtypes, shapes)
    return ReplaySample(info, data)


class _BlockPool:
    """Recycled 64-byte aligned memory for large blocks.

    TensorFlow adopts an aligned array that a tf.data generator yields instead of copying it,
    keeping a reference to the array while its tensor lives; a buffer is reused only once
    nothing but the pool references it (its reference count tells). Fresh multi-megabyte
    arrays per block would cost more in page faults than the copy they save.
    """

    _MAX_BUFFERS = 8

    def __init__(self):
        self._buffers: List[np.ndarray] = []

    def _is_free(self, index: int) -> bool:
        # The list's reference and the argument's; every view of the buffer adds one (numpy
        # views refer to the array owning the memory), and so does TensorFlow while it uses it.
        return sys.getrefcount(self._buffers[index]) == 2

    def get(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        needed = nbytes + 64  # room to align the start
        slot = None
        for index in range(len(self._buffers)):
            if self._is_free(index):
                if self._buffers[index].nbytes >= needed:
                    slot = index
                    break
                slot = index if slot is None else slot
        if slot is not None and self._buffers[slot].nbytes >= needed:
            buffer = self._buffers[slot]
        else:
            # Room for blocks a little larger than this one, whose sizes vary with the response.
            buffer = np.empty(needed + nbytes // 4, np.uint8)
            if slot is not None:
                self._buffers[slot] = buffer
            elif len(self._buffers) < self._MAX_BUFFERS:
                self._buffers.append(buffer)
        start = (-buffer.ctypes.data) % 64
        return buffer[start:start + nbytes].view(dtype).reshape(shape)


def _decode_block(packed: framing.PackedSampleResponse, flat_dtypes: List[np.dtype],
                  pool: Optional[_BlockPool] = None):
    """Decodes one response into (SampleInfo of [N] arrays, flat [N, ...] columns), or None
    when the response needs the general per-item path (multi-slice or delta-encoded columns,
    or items whose shapes differ within a column). A columnar response (the server already
    laid each column out, see `column_batch.encode_columns`) costs one `np.frombuffer` per column.

    The fast path copies each item's bytes once, from the received message into one array per
    column (a `bytes.join` over views for small items; row copies into an aligned pooled array,
    which TensorFlow adopts without another copy, for large ones), so the per-item cost is a few
    list operations.

    Raises:
      InvalidArgumentError: the items do not have the dataset's number of columns or dtypes.
      DataLossError: a column's bytes do not match its declared shape.
    """
    response = packed.response
    items, chunks = response.items, response.chunks
    num_items = len(items.keys)
    num_leaves = len(flat_dtypes)
    if any(c != num_leaves for c in items.num_columns):
        raise errors.InvalidArgumentError(
            f"sampled items have {sorted(set(items.num_columns))} columns but the dataset declares "
            f"{num_leaves} (dtypes/shapes); use ReplayDataset.from_table_signature or fix dtypes")
    if response.HasField("columns"):
        out = column_batch.decode_columns(response.columns, num_items)
        for leaf, (column, dtype) in enumerate(zip(out, flat_dtypes)):
            _check_dtype(leaf, column.dtype, dtype)
        return _sample_info(response), out
    if len(items.slice_chunk_keys) != num_items * num_leaves:
        return None  # some item column spans several chunks
    flags = list(chunks.flags)
    if any(f & codec.FLAG_DELTA for f in flags):
        return None
    chunk_column_start = {}
    position = 0
    for key, count in zip(chunks.keys, chunks.num_columns):
        chunk_column_start[key] = position
        position += count
    column_data = packed.column_data
    chunk_dtypes = [specs.parse_dtype(d, 'sampled column dtype') for d in chunks.dtypes]
    dtype_index = list(chunks.dtype_index)
    ranks = list(chunks.ranks)
    dims = list(chunks.shape_dims)
    dim_start = [0] * len(ranks)
    for i in range(1, len(ranks)):
        dim_start[i] = dim_start[i - 1] + ranks[i - 1]
    slice_keys = list(items.slice_chunk_keys)
    slice_offsets = list(items.slice_offsets)
    slice_lengths = list(items.slice_lengths)
    slice_indices = list(items.slice_indices)
    squeeze = list(items.squeeze)
    decompressed: Dict[int, bytes] = {}
    out = []
    for leaf in range(num_leaves):
        parts = []
        layout = None
        for j in range(leaf, num_items * num_leaves, num_leaves):
            column = chunk_column_start[slice_keys[j]] + slice_indices[j]
            item_layout = (column_layout := (dtype_index[column], ranks[column], dim_start[column]),
                           slice_lengths[j], squeeze[j])
            if layout is None:
                layout = item_layout
                rank_start = column_layout[2]
                step_shape = tuple(dims[rank_start:rank_start + column_layout[1]])
                dtype = chunk_dtypes[column_layout[0]]
                step_bytes = int(np.prod(step_shape, dtype=np.int64)) * dtype.itemsize
            elif item_layout != layout:
                rank_start = column_layout[2]
                if (column_layout[0] != layout[0][0] or item_layout[1:] != layout[1:]
                        or tuple(dims[rank_start:rank_start + column_layout[1]]) != step_shape):
                    return None  # items of different shapes in this column
            raw = column_data[column]
            if flags[column] & codec.FLAG_COMPRESSED:
                raw = decompressed.get(column)
                if raw is None:
                    try:
                        raw = decompressed[column] = lz4.block.decompress(column_data[column])
                    except lz4.block.LZ4BlockError as e:
                        raise errors.DataLossError(
                            f"column {leaf} of a sample response is not valid lz4 data: {e}") from None
            start = slice_offsets[j] * step_bytes
            stop = start + slice_lengths[j] * step_bytes
            parts.append(raw if start == 0 and stop == len(raw) else memoryview(raw)[start:stop])
        _check_dtype(leaf, dtype, flat_dtypes[leaf])
        item_shape = step_shape if layout[2] else (layout[1],) + step_shape
        item_bytes = int(np.prod(item_shape, dtype=np.int64)) * dtype.itemsize
        received_bytes = sum(len(p) for p in parts)
        if received_bytes != num_items * item_bytes:
            raise errors.DataLossError(
                f"column {leaf} of a sample response holds {received_bytes} bytes, which do not fit "
                f"{num_items} items of shape {item_shape} and dtype {dtype.name}")
        if pool is not None and item_bytes >= _LARGE_ITEM_BYTES:
            block = pool.get((num_items,) + item_shape, dtype)
            # memoryview slice assignment: a memcpy per item, without numpy's per-call work
            target = memoryview(block.reshape(-1).view(np.uint8))
            start = 0
            for part in parts:
                target[start:start + item_bytes] = part
                start += item_bytes
            del target
            out.append(block)
        else:
            out.append(np.frombuffer(b"".join(parts), dtype=dtype).reshape((num_items,) + item_shape))
    return _sample_info(response), out


def _check_dtype(leaf: int, received: np.dtype, declared: np.dtype) -> None:
    """Raises InvalidArgumentError when column `leaf` of the sampled items is not `declared`."""
    if received != declared:
        raise errors.InvalidArgumentError(
            f"column {leaf} of the sampled items has dtype {received.name} but the dataset declares "
            f"{declared.name}; fix dtypes or use ReplayDataset.from_table_signature")


def _sample_info(response) -> SampleInfo:
    return SampleInfo(
        key=np.array(response.items.keys, dtype=np.uint64),
        probability=np.array(response.probabilities, dtype=np.float64),
        table_size=np.array(response.table_sizes, dtype=np.int64),
        priority=np.array(response.priorities, dtype=np.float64),
        times_sampled=np.array(response.times_sampled, dtype=np.int32))


def _decode_items_one_by_one(packed: framing.PackedSampleResponse, flat_dtypes: List[np.dtype]):
    """The general path: yields one-item blocks decoded through the replay data model."""
    response = packed.response
    chunks = {c.key: c for c in codec.decode_chunks(response.chunks, validate=False,
                                                   column_data=packed.column_data)}
    pairs = codec.decode_items(response.items, codec.resolver(chunks, "the sample response"))
    cache: dict = {}
    for i, (_, item) in enumerate(pairs):
        info = SampleInfo(
            key=np.array([item.key], np.uint64),
            probability=np.array([response.probabilities[i]], np.float64),
            table_size=np.array([response.table_sizes[i]], np.int64),
            priority=np.array([response.priorities[i]], np.float64),
            times_sampled=np.array([response.times_sampled[i]], np.int32))
        columns = item.decode(cache)
        if len(columns) != len(flat_dtypes):
            raise errors.InvalidArgumentError(
                f"sampled items have {len(columns)} columns but the dataset declares {len(flat_dtypes)}")
        for leaf, (value, dtype) in enumerate(zip(columns, flat_dtypes)):
            _check_dtype(leaf, value.dtype, dtype)
        yield info, [c[None] for c in columns]


# While no response comes, a stream hands tf.data an empty block this often, so the generator
# returns to TensorFlow, which can then cancel the read (a TF1 session closed while a
# `get_next` waits on an empty table); a generator blocked in Python could never be cancelled.
_IDLE_TICK_S = 0.25


class _Prefetcher:
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
        """The responses; while none comes, None every `_IDLE_TICK_S` (see `_BlockStream`)."""
        idle = 0.0
        while True:
            try:
                response, error = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._closed.is_set():
                    return
                idle += 0.1
                if idle >= _IDLE_TICK_S:
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


class _Closer:
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


def _shape_text(shape: tf.TensorShape) -> str:
    return specs.tf_shape_text(None if shape.rank is None else shape.as_list())


class _SignatureCheck:
    """What a dataset requests from a table, checked against the table's signature (when it has
    one) as a stream opens, so that a dataset which does not fit the table fails at once with
    what to change, rather than at its first sample (or never, on an empty table).

    An item's shape fits a signature leaf when it is the leaf's shape or the leaf's shape with a
    leading time dimension (a signature may describe one step). With `step_shapes` (datasets
    that yield the steps of items), each step's shape must fit the leaf's shape."""

    def __init__(self, table: str, flat_dtypes: List[np.dtype], flat_shapes: List[tf.TensorShape],
                 step_shapes: Optional[List[tf.TensorShape]] = None):
        self.table = table
        self.flat_dtypes = flat_dtypes
        self.flat_shapes = flat_shapes
        self.step_shapes = step_shapes

    def __call__(self, client: Client) -> None:
        """Raises InvalidArgumentError when the request does not fit the table's signature; an
        unreachable server or unknown table is left to the stream to report."""
        try:
            signature = client.server_info().get(self.table)
        except errors.ReplayError:
            return
        signature = None if signature is None else signature.signature
        if not signature:
            return
        paths_and_leaves = tree.flatten_with_path(signature)
        leaves = [leaf for _, leaf in paths_and_leaves]
        if len(leaves) != len(self.flat_dtypes):
            raise errors.InvalidArgumentError(
                f"Inconsistent number of tensors requested from table '{self.table}'.  Requested "
                f"{len(self.flat_dtypes)} tensors, but table signature shows {len(leaves)} tensors.  "
                "Pass dtypes and shapes with the structure of the table's signature, or build the "
                "dataset with from_table_signature.")
        requested_shapes = self.step_shapes if self.step_shapes is not None else self.flat_shapes
        for index, ((path, spec), dtype, requested) in enumerate(
                zip(paths_and_leaves, self.flat_dtypes, requested_shapes)):
            step = tf.TensorShape(spec.shape)
            if self.step_shapes is not None:
                fits = requested.is_compatible_with(step)
            else:
                fits = (requested.is_compatible_with(step)
                        or requested.is_compatible_with(tf.TensorShape([None]).concatenate(step)))
            if np.dtype(spec.dtype) != np.dtype(dtype) or not fits:
                raise errors.InvalidArgumentError(
                    f"Requested incompatible tensor at flattened index {index} from table "
                    f"'{self.table}'.  Requested (dtype, shape): ({specs.tf_dtype_name(dtype)}, "
                    f"{_shape_text(requested)}).  Signature (dtype, shape): ({specs.tf_dtype_name(spec.dtype)}, "
                    f"{_shape_text(step)}) at {'/'.join(map(str, path)) or 'the root'}.  Pass a dtype "
                    "and shape that fit the table's signature, or build the dataset with "
                    "from_table_signature.")


    def check_steps(self, columns: List[np.ndarray]) -> None:
        """With `step_shapes`: raises InvalidArgumentError when a block's items (columns of
        [N, ...] arrays) do not have steps of those shapes (each item is a sequence of steps, or
        one step)."""
        if self.step_shapes is None:
            return
        for column, dtype, step in zip(columns, self.flat_dtypes, self.step_shapes):
            item_shape = column.shape[1:]
            if step.is_compatible_with(item_shape):  # an item of one step (inserted whole)
                continue
            steps = item_shape[1:] if item_shape else item_shape
            if not step.is_compatible_with(steps):
                raise errors.InvalidArgumentError(
                    f"Specification has (dtype, shape): ({specs.tf_dtype_name(dtype)}, {_shape_text(step)}).  "
                    f"Tensor has (dtype, shape): ({specs.tf_dtype_name(column.dtype)}, "
                    f"{_shape_text(tf.TensorShape(steps))}).  The items of table '{self.table}' have "
                    "steps of another shape: pass the shape of one of their steps.")


class _BlockStream:
    """The generator behind one worker: yields blocks of many items as one ReplaySample of
    [N, ...] arrays in the dataset's structure."""

    def __init__(self, address: str, table: str, flat_dtypes: List[np.dtype], max_in_flight: int,
                 max_samples_per_stream: int, rate_limiter_timeout_ms: int, tolerate_failure: bool,
                 metrics: StreamMetrics, structure: Any = None,
                 closer: Optional[_Closer] = None, columnar: bool = False,
                 client_options: Optional[Dict[str, Any]] = None, max_samples: int = -1,
                 check_signature: Optional[_SignatureCheck] = None,
                 flat_shapes: Optional[List[tf.TensorShape]] = None):
        self.address = address
        self.check_signature = check_signature
        self.max_samples = max_samples
        self.client_options = dict(client_options or {})
        self.columnar = columnar
        self.closer = closer if closer is not None else _Closer()
        self.closed = self.closer.event
        self.structure = structure if structure is not None else [None] * len(flat_dtypes)
        self.table = table
        self.flat_dtypes = flat_dtypes
        self.max_in_flight = max_in_flight
        self.max_samples_per_stream = max_samples_per_stream
        self.rate_limiter_timeout_ms = rate_limiter_timeout_ms
        self.tolerate_failure = tolerate_failure
        self.metrics = metrics
        # A block of no samples, handed on while no response comes: tf.data passes it on as
        # nothing (`unbatch`, `rebatch`). Unknown sizes are 0 in it, unknown ranks 0-d.
        item_shapes = [() if s is None or s.rank is None else tuple(d or 0 for d in s)
                       for s in (flat_shapes or [None] * len(flat_dtypes))]
        self.empty_block = ReplaySample(
            SampleInfo(*[np.zeros(0, tf.as_dtype(d).as_numpy_dtype) for d in INFO_DTYPES]),
            tree.unflatten_as(self.structure, [np.zeros((0,) + shape, dtype)
                                               for shape, dtype in zip(item_shapes, flat_dtypes)]))

    def __call__(self):
        client = Client(self.address, **self.client_options)
        prefetcher = None
        pool = _BlockPool()
        if not self.closer.register(client):
            return
        try:
            if self.check_signature is not None:
                self.check_signature(client)
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
                    prefetcher = _Prefetcher(client.sample_responses(
                        self.table, self.max_in_flight, self.rate_limiter_timeout_ms,
                        stream_samples, columnar=self.columnar), closed=self.closed)
                    for response in prefetcher:
                        if response is None:
                            yield self.empty_block
                            continue
                        count = len(response.response.probabilities)
                        received += count
                        total += count
                        self.metrics.record_block(self.address, count)
                        block = _decode_block(response, self.flat_dtypes, pool)
                        if block is not None:
                            if self.check_signature is not None:
                                self.check_signature.check_steps(block[1])
                            yield ReplaySample(block[0], tree.unflatten_as(self.structure, block[1]))
                        else:
                            for info, columns in _decode_items_one_by_one(response, self.flat_dtypes):
                                if self.check_signature is not None:
                                    self.check_signature.check_steps(columns)
                                yield ReplaySample(info, tree.unflatten_as(self.structure, columns))
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


def lists_to_tuples(structure: Any) -> Any:
    """`structure` with every list in the nest made a tuple (as Reverb's datasets do: tf.data
    element structures cannot hold lists)."""
    if isinstance(structure, list):
        return tuple(lists_to_tuples(v) for v in structure)
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        return type(structure)(*(lists_to_tuples(v) for v in structure))
    if isinstance(structure, tuple):
        return tuple(lists_to_tuples(v) for v in structure)
    if isinstance(structure, dict):
        return type(structure)((k, lists_to_tuples(v)) for k, v in structure.items())
    return structure


def _check_arguments(table, dtypes, shapes, max_in_flight_samples_per_worker, num_workers_per_iterator,
                     max_samples_per_stream, rate_limiter_timeout_ms):
    if not isinstance(table, str) or not table:
        raise errors.InvalidArgumentError(f"table must be a non-empty table name, got {table!r}")
    if max_in_flight_samples_per_worker < 1:
        raise errors.InvalidArgumentError(
            f"max_in_flight_samples_per_worker must be >= 1, got {max_in_flight_samples_per_worker}")
    if num_workers_per_iterator == 0 or num_workers_per_iterator < -1:
        raise errors.InvalidArgumentError(
            f"num_workers_per_iterator must be -1 (automatic) or >= 1, got {num_workers_per_iterator}")
    if max_samples_per_stream == 0 or max_samples_per_stream < -1:
        raise errors.InvalidArgumentError(
            f"max_samples_per_stream must be -1 (unlimited) or >= 1, got {max_samples_per_stream}")
    if rate_limiter_timeout_ms < -1:
        raise errors.InvalidArgumentError(
            f"rate_limiter_timeout_ms must be an integer >= -1 (-1 waits forever), got {rate_limiter_timeout_ms}")
    try:
        tree.map_structure_up_to(dtypes, tf.TensorShape, shapes)
    except (ValueError, TypeError) as e:
        raise errors.InvalidArgumentError(
            f"dtypes and shapes must have the same nest structure: {e}") from None


def _client_options(token, root_certificates, max_message_bytes) -> Dict[str, Any]:
    """The keyword arguments of `Client` the dataset's clients are built with."""
    options: Dict[str, Any] = {"token": token, "root_certificates": root_certificates}
    if max_message_bytes is not None:
        options["max_message_bytes"] = int(max_message_bytes)
    return options


def _sample_pipeline(addresses: List[str], table: str, dtypes: Any, shapes: Any,
                     max_in_flight_samples_per_worker: int, num_workers_per_iterator: int,
                     max_samples_per_stream: int, rate_limiter_timeout_ms: int,
                     metrics: StreamMetrics, closer: _Closer,
                     client_options: Dict[str, Any], max_samples: int = -1,
                     step_shapes: Any = None) -> tf.data.Dataset:
    """The block pipeline of a `ReplayDataset`: per-stream generators of blocks (each a
    ReplaySample of [N, ...] arrays), merged. The dataset unbatches it into single samples, or
    rebatches it when batched (`ReplayDataset.batch`). Arguments are checked and converted by
    the caller."""
    workers = _DEFAULT_WORKERS if num_workers_per_iterator == -1 else int(num_workers_per_iterator)
    if max_samples >= 0:
        workers = 1  # one stream per server keeps the total exact and requests nothing beyond it
    signature = _block_signature(dtypes, shapes)
    flat_dtypes = [np.dtype(d.as_numpy_dtype) for d in tree.flatten(dtypes)]
    tolerate_failure = len(addresses) > 1
    # Small items come columnar: the server sends only the steps they reference, laid out
    # as the dataset's arrays. Large ones come with their chunks, whose bytes are copied
    # once, straight from the message into pooled arrays.
    flat_shapes = tree.flatten_up_to(dtypes, shapes)
    columnar = all(s.is_fully_defined() for s in flat_shapes) and sum(
        s.num_elements() * d.itemsize for s, d in zip(flat_shapes, flat_dtypes)) < _LARGE_ITEM_BYTES

    check = _SignatureCheck(table, flat_dtypes, flat_shapes,
                            None if step_shapes is None else tree.flatten_up_to(dtypes, step_shapes))
    streams = [_BlockStream(address, table, flat_dtypes, int(max_in_flight_samples_per_worker),
                            int(max_samples_per_stream), int(rate_limiter_timeout_ms),
                            tolerate_failure, metrics, structure=dtypes, closer=closer,
                            columnar=columnar, client_options=client_options, max_samples=max_samples,
                            check_signature=check, flat_shapes=flat_shapes)
               for address in addresses for _ in range(workers)]

    def run_stream(index):
        return streams[int(index)]()

    def stream_dataset(index):
        return tf.data.Dataset.from_generator(run_stream, args=(index,), output_signature=signature)

    if len(streams) == 1:
        # Read one block ahead on a tf.data thread, as `prefetch(1)` would; but a cancelled
        # read (a TF1 session closed while `get_next` waits) ends with CancelledError here,
        # where through `prefetch` it would look like the end of the data.
        blocks = stream_dataset(0).map(tf.autograph.experimental.do_not_convert(lambda block: block),
                                       num_parallel_calls=1)
    else:
        # Each stream is pulled by its own tf.data thread; blocks come out as they are ready.
        blocks = tf.data.Dataset.range(len(streams)).interleave(
            stream_dataset, cycle_length=len(streams), block_length=1,
            num_parallel_calls=len(streams), deterministic=False)
    return blocks


class ReplayDataset(tf.data.Dataset):
    """A `tf.data.Dataset` of `ReplaySample(info, data)` streamed from replay servers, which
    owns its sample streams (as Reverb's ReplayDataset, a `tf.data.Dataset` subclass).

    Elements: `info` is a `SampleInfo` of scalars (dtypes `INFO_DTYPES`); `data` has the nest
    structure of `dtypes`/`shapes`. Every tf.data transformation, `tf.distribute` input
    function and `tf.function` loop accepts it. Transformations return plain datasets, so keep
    the `ReplayDataset` itself to read its `metrics` and to `close()` it; closing ends the
    streams of every pipeline built on it (`ds.batch(32).map(f)` included). Used as a context
    manager (`with ReplayDataset(...) as ds:`) it closes at the end of the block.

    Args:
      server_address: "host:port", or a list of them to merge several (sharded) servers.
      table: the table to sample.
      dtypes: nest of dtypes of one item's data (the table's signature structure).
      shapes: nest of shapes (tf.TensorShape or lists, None for unknown sizes), same structure.
      max_in_flight_samples_per_worker: samples each worker keeps requested from the server
        ahead of consumption (the prefetch budget of one stream).
      num_workers_per_iterator: parallel streams per server for each iterator; -1 picks 1 (one
        stream keeps its whole in-flight budget requested; more streams help against network
        latency to remote servers, not on a few local cores). 1 reads a FIFO table in exact order.
      max_samples_per_stream: samples after which a worker opens a new stream (spreads load
        over servers behind a load balancer); -1 keeps one stream.
      rate_limiter_timeout_ms: -1 waits forever for samples; >= 0 ends the dataset (end of
        sequence, no error) when a stream gets no sample within that many milliseconds.
      metrics: a `StreamMetrics` to count into; a new one when None.
      token: the servers' access token, when they require one (as `Client(token=...)`).
      root_certificates: PEM bytes (or str) of the CA or self-signed certificate to trust;
        given, the streams connect over TLS (as `Client(root_certificates=...)`).
      max_message_bytes: the largest sample response accepted (as `Client`); None keeps the
        client's default.
      max_samples: -1 (unlimited), or the samples each iteration of the dataset yields before
        it ends; it then reads one stream per server and requests no sample beyond them (as
        Reverb's `max_samples`: the rest stay in the table for others).
      step_shapes: for datasets that yield the steps of items (`replay.reverb.TimestepDataset`),
        the nest of one step's shapes; the table's signature is then read as describing one step.
      keep_freed_heap_memory: apply `replay.heap_policy` to this process (glibc keeps freed
        memory for the next responses instead of faulting it in again; 18-20k against 24-28k
        items/s of 40 kB). Process-wide, so off unless the process is the learner's own.

    When the table has a signature, each stream checks dtypes and shapes against it as it opens
    (an item may have the signature's shape or add a leading time dimension to it).

    Raises:
      InvalidArgumentError: a bad argument (the message names it and the allowed values).
    """

    def __init__(self, server_address: Union[str, Sequence[str]], table: str, dtypes: Any, shapes: Any,
                 max_in_flight_samples_per_worker: int, num_workers_per_iterator: int = -1,
                 max_samples_per_stream: int = -1, rate_limiter_timeout_ms: int = -1,
                 metrics: Optional[StreamMetrics] = None, *, token: Optional[str] = None,
                 root_certificates: Optional[Union[bytes, str]] = None,
                 max_message_bytes: Optional[int] = None, max_samples: int = -1,
                 step_shapes: Any = None, keep_freed_heap_memory: bool = False):
        addresses = _as_addresses(server_address)
        client_options = _client_options(token, root_certificates, max_message_bytes)
        if max_samples == 0 or max_samples < -1:
            raise errors.InvalidArgumentError(f"max_samples must be -1 (unlimited) or >= 1, got {max_samples}")
        _check_arguments(table, dtypes, shapes, max_in_flight_samples_per_worker, num_workers_per_iterator,
                         max_samples_per_stream, rate_limiter_timeout_ms)
        # Shapes may be lists, so they are read only down to the leaves of `dtypes`; lists in
        # the nest become tuples (tf.data nests have no lists).
        shapes = lists_to_tuples(tree.map_structure_up_to(dtypes, tf.TensorShape, shapes))
        dtypes = lists_to_tuples(tree.map_structure(tf.as_dtype, dtypes))
        if keep_freed_heap_memory:
            heap_policy.keep_freed_heap_memory()
        self._metrics = metrics if metrics is not None else StreamMetrics()
        self._closer = _Closer()
        blocks = _sample_pipeline(
            addresses, table, dtypes, shapes, max_in_flight_samples_per_worker, num_workers_per_iterator,
            max_samples_per_stream, rate_limiter_timeout_ms, self._metrics, self._closer, client_options,
            max_samples, step_shapes)
        # Blocks already have the element structure, so unbatching is the only per-item step.
        self._pipeline = blocks.unbatch()
        # `batch` rebatches the blocks directly; with max_samples the count is cut per sample.
        self._blocks: Optional[tf.data.Dataset] = blocks if max_samples < 0 else None
        if max_samples >= 0:
            self._pipeline = self._pipeline.take(max_samples)
        # Named rather than super(): a subclass may also derive from tf.compat.v1.data.Dataset,
        # whose constructor takes no variant tensor.
        tf.data.Dataset.__init__(self, self._pipeline._variant_tensor)  # noqa: SLF001 - how tf.data subclasses are built

    # -- tf.data.Dataset ----------------------------------------------------------------------

    def _inputs(self):
        return [self._pipeline]

    @property
    def element_spec(self):
        return self._pipeline.element_spec

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None,
              name=None) -> tf.data.Dataset:
        """As `tf.data.Dataset.batch`: the same batches of consecutive samples, in the same order,
        with the same element spec. Cut straight from the received blocks (`rebatch`), so each
        sample is copied once into its batch instead of split out and then copied back in."""
        if (self._blocks is None or not isinstance(batch_size, int) or batch_size < 1
                or num_parallel_calls is not None or deterministic is not None or name is not None):
            return super().batch(batch_size, drop_remainder, num_parallel_calls, deterministic, name)
        batched = self._blocks.rebatch(batch_size, drop_remainder=drop_remainder)
        if isinstance(self, tf.compat.v1.data.Dataset):
            # What tf.compat.v1 datasets' own `batch` returns (TrajectoryDataset is one).
            from tensorflow.python.data.ops import dataset_ops  # pylint: disable=g-direct-tensorflow-import

            batched = dataset_ops.DatasetV1Adapter(batched)
        return batched

    # -- the streams ----------------------------------------------------------------------------

    @property
    def metrics(self) -> StreamMetrics:
        """Per-server counters and failures of this dataset's streams."""
        return self._metrics

    @property
    def closed(self) -> bool:
        return self._closer.event.is_set()

    def close(self) -> None:
        """Ends every stream of this dataset now, quietly (also one waiting for samples that will
        not come), and any stream an iterator would open later: iterators of this dataset and of
        datasets built on it reach their end. Call it before stopping the servers, so the
        streams do not fail instead. Idempotent."""
        self._closer()

    def __enter__(self) -> "ReplayDataset":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    # The names of `metrics` and `close` when `ReplayDataset(...)` returned a plain tf.data
    # dataset carrying them as attributes; kept for code written against them.

    @property
    def replay_metrics(self) -> StreamMetrics:
        return self._metrics

    @property
    def replay_close(self):
        return self.close

    @classmethod
    def from_table_signature(cls, server_address: Union[str, Sequence[str]], table: str,
                             max_in_flight_samples_per_worker: int, num_workers_per_iterator: int = -1,
                             max_samples_per_stream: int = -1, rate_limiter_timeout_ms: int = -1,
                             metrics: Optional[StreamMetrics] = None,
                             get_signature_timeout_secs: Optional[float] = None, *,
                             token: Optional[str] = None,
                             root_certificates: Optional[Union[bytes, str]] = None,
                             max_message_bytes: Optional[int] = None) -> "ReplayDataset":
        """A ReplayDataset whose dtypes and shapes come from the table's signature (read with
        `server_info` from the first reachable server). `token`, `root_certificates` and
        `max_message_bytes` are used for that call and for the dataset's streams (see
        `ReplayDataset`).

        Raises:
          NotFoundError: no server has the table; InvalidArgumentError: the table has no
          signature (pass dtypes and shapes to ReplayDataset instead); UnavailableError: no
          server could be reached.
        """
        addresses = _as_addresses(server_address)
        client_options = _client_options(token, root_certificates, max_message_bytes)
        last_error: Optional[Exception] = None
        for address in addresses:
            client = Client(address, **client_options)
            try:
                info = client.server_info(timeout=get_signature_timeout_secs)
            except errors.UnavailableError as e:
                last_error = e
                continue
            finally:
                client.close()
            if table not in info:
                raise errors.NotFoundError(
                    f"the server at {address} has no table {table!r} (tables: {sorted(info)})")
            signature = info[table].signature
            if signature is None:
                raise errors.InvalidArgumentError(
                    f"table {table!r} at {address} has no signature; create it with "
                    "Table(..., signature=...) or call ReplayDataset with dtypes and shapes")
            dtypes = tree.map_structure(lambda s: tf.as_dtype(s.dtype), signature)
            shapes = tree.map_structure(lambda s: tf.TensorShape(list(s.shape)), signature)
            return cls(addresses, table, dtypes, shapes, max_in_flight_samples_per_worker,
                       num_workers_per_iterator, max_samples_per_stream, rate_limiter_timeout_ms, metrics,
                       **client_options)
        raise errors.UnavailableError(
            f"no replay server reachable at {addresses} to read the signature of {table!r}: {last_error}")
