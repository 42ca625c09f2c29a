"""ReplayDataset: a tf.data pipeline that streams samples from replay servers.

This sits between `replay.Server` and the learner, and is the tf.data glue of the dataset: the
streams themselves (`replay.sample_streams`: one SampleStream call per worker, read on its own
thread), the decoding of responses into blocks of many items (`replay.sample_blocks`) and the
check against the table's signature (`replay.dataset_signature`) live beside it. Each worker is
one tf.data generator yielding blocks, one ReplaySample of [N, ...] arrays per response; tf.data
splits them into items in C++ (`unbatch`), so a following `.batch(n)` pays no per-item Python
cost (`ReplayDataset.batch` even cuts batches straight from the blocks). Several workers per
iterator run in parallel (`interleave`), each keeping up to `max_in_flight_samples_per_worker`
samples in flight on the server side, which is the prefetch budget.
See docs/architecture.md, "Data path" and "Processes and threads".

`ReplayDataset` is a `tf.data.Dataset` subclass (as Reverb's): it builds that pipeline and
takes on its variant tensor, so `isinstance(ds, tf.data.Dataset)` holds and every tf.data
transformation, `tf.distribute` input function and `tf.function` loop accepts it. It owns its
streams: `ds.metrics` (`StreamMetrics`) counts per server and `ds.close()` ends every stream,
including those of pipelines built on it (`ds.batch(32)` returns a plain dataset, so keep `ds`).
With `emit_timesteps=True` it yields the steps of the sampled items instead of the items
(Reverb's `TimestepDataset`, which `replay.reverb` builds this way).

Given several server addresses the dataset merges their streams (each server gets its own
workers; blocks come out in the order they are ready). A server that dies ends its streams
only: the failure is logged and counted in the metrics and the dataset keeps reading from the
other servers. With a single address a dead server is an error of the dataset, as in Reverb.
A stream that breaks after delivering samples (for example a dropped connection) is reopened;
only a stream that fails before delivering any sample counts as the server's failure.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tree

from replay import dataset_errors, errors, heap_policy, shared_ring
from replay.client import Client
from replay.dataset_iteration import FastIteration, FastIterationDataset, FastIterationDatasetV1
from replay.dataset_signature import SignatureCheck
from replay.replay_sample import ReplaySample, SampleInfo
from replay.sample_blocks import INFO_NUMPY_DTYPES, LARGE_ITEM_BYTES
from replay.sample_streams import BlockStream, Closer, ServerStreamStats, StreamMetrics

INFO_DTYPES = SampleInfo(*[tf.as_dtype(d) for d in INFO_NUMPY_DTYPES])
"""The dtype of each SampleInfo field in dataset elements (Reverb's choice)."""

# Streams per server when num_workers_per_iterator is -1. One stream already keeps its whole
# in-flight budget requested; on a 2-core machine a second stream only adds GIL contention
# (measured with tools/bench_replay.py --dataset --dataset-workers 1 and 2: 85k vs 76k items/s at
# 400 B, 17.0k vs 15.7k at 40 kB).
_DEFAULT_WORKERS = 1
# With num_workers_per_iterator -1, the one stream keeps the budget of as many workers (each
# max_in_flight_samples_per_worker) as fit in about this many samples and bytes: a budget of a
# few samples makes every response wait a round trip for the next request (at 8 samples of 4 kB
# in flight, 2.5k items/s where 256 in flight ran 27k on the same loaded machine).
_AUTO_BUDGET_SAMPLES = 512
_AUTO_BUDGET_BYTES = 16 * 1024 * 1024


def auto_in_flight(max_in_flight_samples_per_worker: int, item_bytes: Optional[int]) -> int:
    """The in-flight budget of a dataset's stream when num_workers_per_iterator is -1: a whole
    multiple of max_in_flight_samples_per_worker (the budget of that many workers, so samples
    are still requested in whole batches of it), about `_AUTO_BUDGET_SAMPLES` samples and at
    most `_AUTO_BUDGET_BYTES` of items of `item_bytes`, never below one worker's; one worker's
    when the items' size is not known (None)."""
    if not item_bytes:
        # Items of unknown shapes (variable-length trajectories) are decoded one by one, a whole
        # response at a time: a large budget would make a reader that takes one sample (a new
        # iterator per element) pay for hundreds.
        return max_in_flight_samples_per_worker
    target = min(_AUTO_BUDGET_SAMPLES, _AUTO_BUDGET_BYTES // item_bytes)
    return max(1, target // max_in_flight_samples_per_worker) * max_in_flight_samples_per_worker

__all__ = ["INFO_DTYPES", "ReplayDataset", "ServerStreamStats", "StreamMetrics", "auto_in_flight",
           "lists_to_tuples"]


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
                     metrics: StreamMetrics, closer: Closer,
                     client_options: Dict[str, Any], max_samples: int = -1,
                     emit_timesteps: bool = False, shared_memory: bool = False) -> tf.data.Dataset:
    """The block pipeline of a `ReplayDataset`: per-stream generators of blocks (each a
    ReplaySample of [N, ...] arrays, of items or with `emit_timesteps` of steps, `shapes` then
    being one step's), merged. The dataset unbatches it into single samples, or rebatches it
    when batched (`ReplayDataset.batch`). Arguments are checked and converted by the caller."""
    workers = _DEFAULT_WORKERS if num_workers_per_iterator == -1 else int(num_workers_per_iterator)
    if max_samples >= 0:
        workers = 1  # one stream per server keeps the total exact and requests nothing beyond it
    signature = _block_signature(dtypes, shapes)
    flat_dtypes = [np.dtype(d.as_numpy_dtype) for d in tree.flatten(dtypes)]
    flat_shapes = tree.flatten_up_to(dtypes, shapes)
    in_flight = int(max_in_flight_samples_per_worker)
    larger_in_flight = None
    if num_workers_per_iterator == -1:
        # One stream, in order, with the budget of several workers (unless sampling removes
        # items: see BlockStream's larger_in_flight). With steps, one step's size stands for
        # an item's: items hold at least one, and the server sizes each response by its bytes,
        # so a credit counted in longer items only lets it sample further ahead (one reader of
        # 4 kB steps, 1 in flight: 0.7k steps/s with the credit of 1, where Reverb's
        # TimestepDataset reads 4.4k).
        item_bytes = (sum(s.num_elements() * d.itemsize for s, d in zip(flat_shapes, flat_dtypes))
                      if all(s.is_fully_defined() for s in flat_shapes) else None)
        larger_in_flight = auto_in_flight(in_flight, item_bytes)
    tolerate_failure = len(addresses) > 1
    # Small items come columnar: the server sends only the steps they reference, laid out
    # as the dataset's arrays. Large ones come with their chunks, whose bytes are copied
    # once, straight from the message into pooled arrays. (With steps, one step's size decides:
    # items of several steps are several times larger, and their step count is not known here.)
    columnar = all(s.is_fully_defined() for s in flat_shapes) and sum(
        s.num_elements() * d.itemsize for s, d in zip(flat_shapes, flat_dtypes)) < LARGE_ITEM_BYTES
    if emit_timesteps:
        check = SignatureCheck(table, flat_dtypes, [tf.TensorShape(None)] * len(flat_shapes), flat_shapes)
        step_ranks = [s.rank for s in flat_shapes]
    else:
        check = SignatureCheck(table, flat_dtypes, flat_shapes)
        step_ranks = None
    item_shapes = [None if s.rank is None else tuple(s.as_list()) for s in flat_shapes]
    streams = [BlockStream(address, table, flat_dtypes, in_flight,
                           int(max_samples_per_stream), int(rate_limiter_timeout_ms),
                           tolerate_failure, metrics, structure=dtypes, closer=closer,
                           columnar=columnar, client_options=client_options, max_samples=max_samples,
                           check_signature=check, item_shapes=item_shapes, step_ranks=step_ranks,
                           larger_in_flight=larger_in_flight, shared_memory=shared_memory)
               for address in addresses for _ in range(workers)]

    # tf.data runs a generator through TensorFlow's PyFunc kernel, which reads most Python
    # exceptions as UnknownError. Each block comes with a token instead: 0, or that of the
    # error the stream failed with (`replay.dataset_errors`), raised with its own tf.errors code by a
    # check op (a NotFoundError for a missing table, as Reverb's dataset op raises).
    typed_errors = dataset_errors.typed_errors_available()
    no_error = np.int64(0)
    failed_block = tree.map_structure(_empty_block_array, signature)

    def run_stream(index):
        try:
            for block in streams[int(index)]():
                yield no_error, block
        except Exception as exc:  # noqa: BLE001 - handed to the check op, or re-raised
            token = dataset_errors.pend_error(exc)
            if token is None:
                raise
            yield np.int64(token), failed_block

    @tf.autograph.experimental.do_not_convert
    def checked(token, block):
        return dataset_errors.check_pending(token, block) if typed_errors else block

    def stream_dataset(index):
        return tf.data.Dataset.from_generator(
            run_stream, args=(index,), output_signature=(tf.TensorSpec([], tf.int64), signature))

    if len(streams) == 1:
        # Read one block ahead on a tf.data thread, as `prefetch(1)` would; but a cancelled
        # read (a TF1 session closed while `get_next` waits) ends with CancelledError here,
        # where through `prefetch` it would look like the end of the data.
        blocks = stream_dataset(0).map(checked, num_parallel_calls=1)
    else:
        # Each stream is pulled by its own tf.data thread; blocks come out as they are ready.
        blocks = tf.data.Dataset.range(len(streams)).interleave(
            lambda index: stream_dataset(index).map(checked), cycle_length=len(streams), block_length=1,
            num_parallel_calls=len(streams), deterministic=False)
    return blocks


def _empty_block_array(spec: tf.TensorSpec) -> np.ndarray:
    """An array of no items that fits `spec` (the block a failed stream yields with its token)."""
    shape = [0] if spec.shape.rank is None else [0 if d is None else d for d in spec.shape.as_list()]
    return np.zeros(shape, spec.dtype.as_numpy_dtype)


class ReplayDataset(FastIteration, tf.data.Dataset):
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
      num_workers_per_iterator: parallel streams per server for each iterator, each with
        max_in_flight_samples_per_worker samples in flight. -1 (automatic) opens one stream with
        the budget of as many workers as fit in about 512 samples and 16 MB (`auto_in_flight`:
        a whole multiple of max_in_flight_samples_per_worker, at least one worker's; one
        worker's for items whose shapes are not fully defined or for a table whose samples remove
        items, such as a queue), so that a
        small per-worker budget does not leave each response waiting a round trip; one stream
        reads a FIFO table in exact order. More streams help against network latency to remote
        servers, not on a few local cores.
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
      emit_timesteps: yield the steps of the sampled items, in order, each with its item's info,
        instead of the items (Reverb's `TimestepDataset`); `dtypes`/`shapes` then describe one
        step and the table's signature is read as describing one step. An item column of a
        step's rank holds one step; otherwise its leading dimension is time, the same for all
        columns of an item. `max_samples` still counts items.
      keep_freed_heap_memory: apply `replay.heap_policy` to this process (glibc keeps freed
        memory for the next responses instead of faulting it in again: 38 against 70 us of CPU
        per 40 kB item). Process-wide (up to 256 MB of freed memory stays with the process);
        False leaves the allocator alone.
      shared_memory: each stream of items of fixed shapes and a budget of at least 256 kB offers
        its server a shared-memory ring (`replay.shared_ring`, 8 to 96 MB of /dev/shm per stream
        while it is open); a server on this host then puts
        the sampled items' bytes there instead of sending them over gRPC (two copies instead of
        six). A server elsewhere ignores it. False keeps every byte on gRPC.

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
                 emit_timesteps: bool = False,
                 keep_freed_heap_memory: bool = heap_policy.DEFAULT_KEEP_FREED_HEAP_MEMORY,
                 shared_memory: bool = shared_ring.DEFAULT_SHARED_MEMORY):
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
        self._closer = Closer()
        blocks = _sample_pipeline(
            addresses, table, dtypes, shapes, max_in_flight_samples_per_worker, num_workers_per_iterator,
            max_samples_per_stream, rate_limiter_timeout_ms, self._metrics, self._closer, client_options,
            max_samples, emit_timesteps, shared_memory)
        # Blocks already have the element structure, so unbatching is the only per-item step.
        self._pipeline = blocks.unbatch()
        # `batch` rebatches the blocks directly; with max_samples the count of items is cut per
        # item (the streams request no more than max_samples; this guards the count). Steps are
        # not items: their streams' count of items is the cut.
        self._blocks: Optional[tf.data.Dataset] = blocks if max_samples < 0 or emit_timesteps else None
        if max_samples >= 0 and not emit_timesteps:
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
        # iterated eagerly without tf.data's per-element nest rebuilding (`replay.dataset_iteration`);
        # tf.compat.v1 datasets' own `batch` returns their adapter (TrajectoryDataset is one)
        if isinstance(self, tf.compat.v1.data.Dataset):
            return FastIterationDatasetV1(batched)
        return FastIterationDataset(batched)

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
