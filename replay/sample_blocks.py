"""Sample responses decoded into blocks: the dataset's side of the sample wire format.

This sits beside `replay.codec` and `replay.column_batch` (which define the wire format) and
below the dataset's streams (`replay.sample_streams`): it turns one `SampleStream` response of
many items into one block, a `SampleInfo` of [N] arrays and one [N, ...] array per column, for
tf.data to split or rebatch in C++. It needs numpy only, no TensorFlow.

A columnar response (the server laid each column out, `column_batch.encode_columns`) costs one
`np.frombuffer` per column. Otherwise each item's bytes are copied once, from the received
message into one array per column: a `bytes.join` over views for small items, row copies into
an aligned pooled array (which TensorFlow adopts without another copy) for large ones.
Responses this cannot take (items spanning several chunks, delta-encoded columns, items of
different shapes) are decoded item by item through the replay data model.

`split_steps` turns a block of items into a block of their steps (Reverb's `TimestepDataset`,
`emit_timesteps`): a reshape of each column and a repeat of the info, no copy of the data.
"""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence, Tuple

import lz4.block
import numpy as np

from replay import codec, column_batch, errors, framing, specs
from replay.replay_sample import SampleInfo

INFO_NUMPY_DTYPES = SampleInfo(key=np.dtype(np.uint64), probability=np.dtype(np.float64),
                               table_size=np.dtype(np.int64), priority=np.dtype(np.float64),
                               times_sampled=np.dtype(np.int32))
"""The numpy dtype of each SampleInfo field in blocks (Reverb's choice)."""

# Items at least this large are copied row by row into pooled aligned arrays instead of one
# bytes.join per block.
LARGE_ITEM_BYTES = 16 * 1024

Block = Tuple[SampleInfo, List[np.ndarray]]
"""A decoded response: (SampleInfo of [N] arrays, one [N, ...] array per flattened column)."""


class BlockPool:
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


def decode_block(packed: framing.PackedSampleResponse, flat_dtypes: List[np.dtype],
                  pool: Optional[BlockPool] = None):
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
        in_ring = packed.release is not None
        out = column_batch.decode_columns(response.columns, num_items,
                                          packed.column_data if in_ring else None)
        for leaf, (column, dtype) in enumerate(zip(out, flat_dtypes)):
            check_dtype(leaf, column.dtype, dtype)
        if in_ring:
            # Views into the shared-memory ring, which the server writes over once released:
            # copied out, into aligned arrays that TensorFlow adopts without another copy.
            out = [_copied(column, pool) for column in out]
        return sample_info(response), out
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
        check_dtype(leaf, dtype, flat_dtypes[leaf])
        item_shape = step_shape if layout[2] else (layout[1],) + step_shape
        item_bytes = int(np.prod(item_shape, dtype=np.int64)) * dtype.itemsize
        received_bytes = sum(len(p) for p in parts)
        if received_bytes != num_items * item_bytes:
            raise errors.DataLossError(
                f"column {leaf} of a sample response holds {received_bytes} bytes, which do not fit "
                f"{num_items} items of shape {item_shape} and dtype {dtype.name}")
        if pool is not None and item_bytes >= LARGE_ITEM_BYTES:
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
    return sample_info(response), out


def _copied(column: np.ndarray, pool: Optional[BlockPool]) -> np.ndarray:
    """A copy of `column`, in pooled memory when there is a pool."""
    if pool is None:
        return column.copy()
    copy = pool.get(column.shape, column.dtype)
    memoryview(copy.reshape(-1).view(np.uint8))[:] = memoryview(column.reshape(-1).view(np.uint8))
    return copy


def check_dtype(leaf: int, received: np.dtype, declared: np.dtype) -> None:
    """Raises InvalidArgumentError when column `leaf` of the sampled items is not `declared`."""
    if received != declared:
        raise errors.InvalidArgumentError(
            f"column {leaf} of the sampled items has dtype {received.name} but the dataset declares "
            f"{declared.name}; fix dtypes or use ReplayDataset.from_table_signature")


def sample_info(response) -> SampleInfo:
    """The SampleInfo of [N] arrays of a response's N samples."""
    return SampleInfo(
        key=np.array(response.items.keys, dtype=np.uint64),
        probability=np.array(response.probabilities, dtype=np.float64),
        table_size=np.array(response.table_sizes, dtype=np.int64),
        priority=np.array(response.priorities, dtype=np.float64),
        times_sampled=np.array(response.times_sampled, dtype=np.int32))


def decode_items_one_by_one(packed: framing.PackedSampleResponse, flat_dtypes: List[np.dtype]):
    """The general path: yields one-item blocks decoded through the replay data model. Columns
    in the shared-memory ring are copied out first (the items' arrays may be views of them)."""
    response = packed.response
    column_data = packed.column_data
    if packed.release is not None:
        column_data = [bytes(c) for c in column_data]
    chunks = {c.key: c for c in codec.decode_chunks(response.chunks, validate=False,
                                                   column_data=column_data)}
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
            check_dtype(leaf, value.dtype, dtype)
        yield info, [c[None] for c in columns]


def empty_block(item_shapes: Sequence[Optional[Sequence[Optional[int]]]],
                flat_dtypes: Sequence[np.dtype]) -> Block:
    """A block of no items whose columns have the given item shapes (None: unknown rank, made
    0-d; unknown sizes are 0)."""
    shapes = [() if s is None else tuple(d or 0 for d in s) for s in item_shapes]
    return (SampleInfo(*[np.zeros(0, d) for d in INFO_NUMPY_DTYPES]),
            [np.zeros((0,) + shape, dtype) for shape, dtype in zip(shapes, flat_dtypes)])


def split_steps(block: Block, step_ranks: Sequence[Optional[int]]) -> Block:
    """The block of the steps of `block`'s items, in order, each step with its item's info.

    A column whose items have the rank of one step (`step_ranks`, None where unknown) holds
    items of one step (inserted whole); otherwise its items' leading dimension is time. The
    columns are reshaped, not copied.

    Raises:
      InvalidArgumentError: the columns of the items have different numbers of steps, or a
        column's items have fewer dimensions than one step.
    """
    info, columns = block
    num_items = len(info.key)
    steps = None
    out = []
    for leaf, (column, rank) in enumerate(zip(columns, step_ranks)):
        item_shape = column.shape[1:]
        if rank is not None and len(item_shape) == rank:
            length = 1
        elif not item_shape or (rank is not None and len(item_shape) != rank + 1):
            raise errors.InvalidArgumentError(
                f"column {leaf} of the sampled items has shape {tuple(item_shape)}, which is neither "
                f"one step of rank {rank} nor a sequence of such steps")
        else:
            length = item_shape[0]
            column = column.reshape((num_items * length,) + item_shape[1:])
        if steps is None:
            steps = length
        elif length != steps:
            raise errors.InvalidArgumentError(
                "TimestepDataset: the columns of a sampled item have different lengths "
                f"({steps} and {length} steps); use TrajectoryDataset for such items")
        out.append(column)
    if steps is not None and steps != 1:
        info = SampleInfo(*[np.repeat(field, steps) for field in info])
    return info, out
