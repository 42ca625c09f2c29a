"""The columnar sample response: sampled items as one byte string per column.

`encode_columns` is the server's fast path for sample responses whose items share a layout
(step and sequence items): only the steps the items reference cross the wire, and the receiver
(`decode_columns`, used by `replay.dataset` and `Client`) builds each [N, ...] array with one
`np.frombuffer`. Items that do not allow it go out as chunks and items (`replay.codec`).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import lz4.block
import numpy as np

from replay import errors, specs
from replay.items import Item
from replay.proto import replay_pb2
from replay.validation import check_field_lengths

def encode_columns(items: Sequence[Item], batch: replay_pb2.ColumnBatch,
                   data_out: Optional[List[bytes]] = None) -> Optional[int]:
    """Writes the values of `items` column by column into an empty `batch` (one uncompressed
    byte string per column, items in order) and returns the bytes written; returns None and
    leaves `batch` untouched when the items do not allow it: a column spanning several chunk
    slices, or a column whose dtype, step shape, length or squeeze differs between items.
    Items covering whole steps of one small chunk (`Item.span`, what writers produce) take a
    faster path that also accepts delta-encoded columns; other items must not be delta-encoded.

    Step items sampled from long chunks then cost the receiver one `np.frombuffer` per column,
    and only the steps the items reference cross the wire. Given `data_out`, the columns' bytes
    are appended to it instead of `batch.data` (the server then places them in a reader's
    shared-memory ring, `replay.shared_ring`).
    """
    if not items:
        return None
    nbytes = _encode_record_columns(items, batch, data_out)
    if nbytes is not None:
        return nbytes
    layout = []
    for squeeze, slices in items[0].trajectory:
        if len(slices) != 1:
            return None
        chunk_key, _, length, index = slices[0]
        data = items[0].chunks[chunk_key].columns[index]
        step_bytes = int(np.prod(data.shape, dtype=np.int64)) * specs.parse_dtype(data.dtype).itemsize
        layout.append((data.dtype, data.shape, length, squeeze, step_bytes))
    num_columns = len(layout)
    parts: List[List[bytes]] = [[] for _ in range(num_columns)]
    decompressed: Dict[int, bytes] = {}
    for item in items:
        trajectory, chunks = item.trajectory, item.chunks
        if len(trajectory) != num_columns:
            return None
        for c, (column_squeeze, slices) in enumerate(trajectory):
            if len(slices) != 1:
                return None
            dtype, shape, length, squeeze, step_bytes = layout[c]
            chunk_key, offset, slice_length, index = slices[0]
            data = chunks[chunk_key].columns[index]
            if (slice_length != length or column_squeeze != squeeze or data.dtype != dtype
                    or data.shape != shape or data.delta_encoded):
                return None
            raw = data.data
            if data.compressed:
                # keyed by id(): every ColumnData stays referenced by its item until we return
                raw = decompressed.get(id(data))
                if raw is None:
                    raw = decompressed[id(data)] = lz4.block.decompress(data.data)
            start = offset * step_bytes
            stop = start + length * step_bytes
            parts[c].append(raw if start == 0 and stop == len(raw) else raw[start:stop])
    return _fill_column_batch(batch, [(dtype, shape, length, squeeze, b"".join(column_parts))
                                      for (dtype, shape, length, squeeze, _), column_parts
                                      in zip(layout, parts)], data_out)


def _encode_record_columns(items: Sequence[Item], batch: replay_pb2.ColumnBatch,
                           data_out: Optional[List[bytes]] = None) -> Optional[int]:
    """`encode_columns` for items that each cover whole steps of one small chunk (`Item.span`),
    the layout of step and sequence items: one slice per item out of its chunk's decoded steps
    (`Chunk.step_records`), then one copy per column. None when an item has another layout, a
    chunk is too large to keep decoded, or the items differ in length, squeeze or columns."""
    span = items[0].span
    if span is None:
        return None
    _, _, length, mask = span
    records_dtype = None
    parts = []
    for item in items:
        span = item.span
        if span is None or span[2] != length or span[3] != mask:
            return None
        offset = span[1]
        records = item.span_chunk.step_records()
        if records is None:
            return None
        dtype, data = records
        if dtype is not records_dtype:
            if records_dtype is not None:
                return None
            records_dtype = dtype
            step_bytes = dtype.itemsize
        parts.append(data[offset * step_bytes:(offset + length) * step_bytes])
    steps = np.frombuffer(b"".join(parts), records_dtype)
    columns = []
    for index, name in enumerate(records_dtype.names):
        field = records_dtype.fields[name][0]
        columns.append((field.base.str, field.shape, length, bool(mask >> index & 1),
                        steps[name].tobytes()))
    return _fill_column_batch(batch, columns, data_out)


def _fill_column_batch(batch: replay_pb2.ColumnBatch, columns,
                       data_out: Optional[List[bytes]] = None) -> int:
    """Writes (dtype, step shape, item length, squeeze, bytes) columns into `batch` (their bytes
    into `data_out` when given); returns the bytes written."""
    dims: List[int] = []
    ranks = []
    for _, shape, length, squeeze, _ in columns:
        item_shape = tuple(shape) if squeeze else (length,) + tuple(shape)
        ranks.append(len(item_shape))
        dims.extend(item_shape)
    batch.dtypes.extend([column[0] for column in columns])
    batch.ranks.extend(ranks)
    batch.shape_dims.extend(dims)
    if data_out is None:
        batch.data.extend([column[4] for column in columns])
    else:
        data_out.extend([column[4] for column in columns])
    return sum(len(column[4]) for column in columns)


def decode_columns(batch: replay_pb2.ColumnBatch, num_items: int,
                   data: Optional[Sequence] = None) -> List[np.ndarray]:
    """The [num_items, ...] arrays of a `ColumnBatch` (read-only views into its bytes, or into
    `data`, the columns' bytes when they came outside the message: `replay.shared_ring`).

    Raises:
      InvalidArgumentError: the batch's parallel fields disagree, a dtype is not one replay
        stores (`specs.parse_dtype`) or a shape cannot be decoded.
      DataLossError: a column's bytes do not fit num_items values of its shape and dtype.
    """
    if data is None:
        data = batch.data
    check_field_lengths("ColumnBatch", len(batch.dtypes), ranks=batch.ranks, data=data)
    dims = list(batch.shape_dims)
    if sum(batch.ranks) != len(dims) or any(r < 0 for r in batch.ranks):
        raise errors.InvalidArgumentError(
            f"ColumnBatch ranks {list(batch.ranks)} do not match its {len(dims)} shape dims")
    out = []
    position = 0
    for c, (dtype_str, rank, column_data) in enumerate(zip(batch.dtypes, batch.ranks, data)):
        shape = tuple(dims[position:position + rank])
        position += rank
        dtype = specs.parse_dtype(dtype_str, f"column {c} has an unusable dtype:")
        shape = specs.check_shape(shape, dtype.itemsize, f"column {c}: shape")
        expected = num_items * dtype.itemsize
        for d in shape:
            expected *= d
        if len(column_data) != expected:
            raise errors.DataLossError(
                f"column {c} holds {len(column_data)} bytes, which do not fit {num_items} values of shape "
                f"{shape} and dtype {dtype.name}")
        out.append(np.frombuffer(column_data, dtype=dtype).reshape((num_items,) + shape))
    return out
