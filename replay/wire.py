"""Conversion between the replay data model (Chunk, Item, TensorSpec) and the wire protos.

Sits between `replay.proto` (the service definition) and the server, client, writers and
checkpoints, which all speak the same packed `ChunkBatch` / `ItemBatch` messages. Encoding
appends to plain lists and sets each repeated field once, so the per-item cost is a few list
appends; decoding validates every incoming message's structure before building anything, so
a malformed message raises a named error (and is rejected with the matching gRPC status)
instead of corrupting stored data. Also holds the protocol version and the metadata keys.
"""
from __future__ import annotations

import json
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import lz4.block
import numpy as np
import tree

from replay import errors, specs
from replay.chunks import Chunk, ColumnData
from replay.items import Item, TrajectoryColumn
from replay.proto import replay_pb2

PROTOCOL_VERSION = 1
"""Bumped whenever the meaning of a message changes; client and server must agree."""

SERVICE_NAME = "replay.ReplayService"
"""The gRPC service of replay.proto."""

PROTOCOL_METADATA_KEY = "replay-protocol"
TOKEN_METADATA_KEY = "replay-token"

# Bits of ChunkBatch.flags.
FLAG_COMPRESSED = 1
FLAG_DELTA = 2
_UINT64_MAX = 2**64 - 1


# ---------------------------------------------------------------------------------------------
# Chunks


def encode_chunks(chunks: Iterable[Chunk], batch: replay_pb2.ChunkBatch,
                  column_data: Optional[List[bytes]] = None) -> None:
    """Appends `chunks` to an empty `batch` (fields are set once, at the end).

    With a `column_data` list, the columns' bytes are appended to it instead of to
    `batch.column_data` (see `PackedInsertRequest`), which saves copying them into the message.
    """
    keys, episode_ids, start_indices, lengths, num_columns = [], [], [], [], []
    dtype_index, ranks, shape_dims, flags, crcs, blobs = [], [], [], [], [], []
    dtypes: Dict[str, int] = {}
    for chunk in chunks:
        keys.append(chunk.key)
        episode_ids.append(chunk.episode_id)
        start_indices.append(chunk.start_index)
        lengths.append(chunk.length)
        num_columns.append(len(chunk.columns))
        for column in chunk.columns:
            index = dtypes.get(column.dtype)
            if index is None:
                index = dtypes[column.dtype] = len(dtypes)
            dtype_index.append(index)
            ranks.append(len(column.shape))
            shape_dims.extend(column.shape)
            flags.append((FLAG_COMPRESSED if column.compressed else 0)
                         | (FLAG_DELTA if column.delta_encoded else 0))
            crcs.append(column.crc32)
            blobs.append(column.data)
    if not keys:
        return
    batch.keys.extend(keys)
    batch.episode_ids.extend(episode_ids)
    batch.start_indices.extend(start_indices)
    batch.lengths.extend(lengths)
    batch.num_columns.extend(num_columns)
    batch.dtypes.extend(dtypes)
    batch.dtype_index.extend(dtype_index)
    batch.ranks.extend(ranks)
    batch.shape_dims.extend(shape_dims)
    batch.flags.extend(flags)
    batch.crc32.extend(crcs)
    if column_data is None:
        batch.column_data.extend(blobs)
    else:
        column_data.extend(blobs)


# ---------------------------------------------------------------------------------------------
# Columnar sample responses


def encode_columns(items: Sequence[Item], batch: replay_pb2.ColumnBatch) -> Optional[int]:
    """Writes the values of `items` column by column into an empty `batch` (one uncompressed
    byte string per column, items in order) and returns the bytes written; returns None and
    leaves `batch` untouched when the items do not allow it: a column spanning several chunk
    slices, or a column whose dtype, step shape, length or squeeze differs between items.
    Items covering whole steps of one small chunk (`Item.span`, what writers produce) take a
    faster path that also accepts delta-encoded columns; other items must not be delta-encoded.

    Step items sampled from long chunks then cost the receiver one `np.frombuffer` per column,
    and only the steps the items reference cross the wire.
    """
    if not items:
        return None
    nbytes = _encode_record_columns(items, batch)
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
                                      in zip(layout, parts)])


def _encode_record_columns(items: Sequence[Item], batch: replay_pb2.ColumnBatch) -> Optional[int]:
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
        chunk_key, offset, _, _ = span
        records = item.chunks[chunk_key].step_records()
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
    return _fill_column_batch(batch, columns)


def _fill_column_batch(batch: replay_pb2.ColumnBatch, columns) -> int:
    """Writes (dtype, step shape, item length, squeeze, bytes) columns into `batch`; returns
    the bytes written."""
    dims: List[int] = []
    ranks = []
    for _, shape, length, squeeze, _ in columns:
        item_shape = tuple(shape) if squeeze else (length,) + tuple(shape)
        ranks.append(len(item_shape))
        dims.extend(item_shape)
    batch.dtypes.extend([column[0] for column in columns])
    batch.ranks.extend(ranks)
    batch.shape_dims.extend(dims)
    batch.data.extend([column[4] for column in columns])
    return sum(len(column[4]) for column in columns)


def decode_columns(batch: replay_pb2.ColumnBatch, num_items: int) -> List[np.ndarray]:
    """The [num_items, ...] arrays of a `ColumnBatch` (read-only views into its bytes).

    Raises:
      InvalidArgumentError: the batch's parallel fields disagree, a dtype is not one replay
        stores (`specs.parse_dtype`) or a shape cannot be decoded.
      DataLossError: a column's bytes do not fit num_items values of its shape and dtype.
    """
    _check_lengths("ColumnBatch", len(batch.dtypes), ranks=batch.ranks, data=batch.data)
    dims = list(batch.shape_dims)
    if sum(batch.ranks) != len(dims) or any(r < 0 for r in batch.ranks):
        raise errors.InvalidArgumentError(
            f"ColumnBatch ranks {list(batch.ranks)} do not match its {len(dims)} shape dims")
    out = []
    position = 0
    for c, (dtype_str, rank, data) in enumerate(zip(batch.dtypes, batch.ranks, batch.data)):
        shape = tuple(dims[position:position + rank])
        position += rank
        dtype = specs.parse_dtype(dtype_str, f"column {c} has an unusable dtype:")
        shape = specs.check_shape(shape, dtype.itemsize, f"column {c}: shape")
        expected = num_items * dtype.itemsize
        for d in shape:
            expected *= d
        if len(data) != expected:
            raise errors.DataLossError(
                f"column {c} holds {len(data)} bytes, which do not fit {num_items} values of shape "
                f"{shape} and dtype {dtype.name}")
        out.append(np.frombuffer(data, dtype=dtype).reshape((num_items,) + shape))
    return out


class PackedInsertRequest:
    """An `InsertRequest` to send whose chunk bytes stay outside the protobuf message.

    `serialize_insert_request` writes `request` and then the bytes of `column_data` as a second
    occurrence of the `chunks` field holding only `column_data` entries. Protobuf parsers merge
    repeated occurrences of a message field (repeated fields are concatenated), so the receiver
    reads exactly the message it would get with the bytes inside `request.chunks.column_data`;
    the sender saves two copies of every payload (into the message and out of it again).
    """

    __slots__ = ("request", "column_data")

    def __init__(self, request: replay_pb2.InsertRequest, column_data: List[bytes]):
        self.request = request
        self.column_data = column_data


class PackedSampleResponse:
    """A `SampleResponse` whose chunk bytes travel outside the protobuf object, both ways.

    The server sends it with `serialize_sample_response` (the layout of `PackedInsertRequest`:
    the message, then one trailing `chunks` occurrence holding only `column_data`), so any
    protobuf parser still reads the plain message. Clients read it with
    `parse_sample_response`, which leaves `column_data` as views into the received bytes: large
    payloads are then copied once, straight into the learner's arrays, instead of into the
    parsed message and out of it again. `response.chunks.column_data` is always empty here.
    """

    __slots__ = ("response", "column_data")

    def __init__(self, response: replay_pb2.SampleResponse, column_data: Sequence):
        self.response = response
        self.column_data = column_data


# Protobuf keys (field number << 3 | wire type 2, length-delimited) of InsertRequest.chunks (1),
# SampleResponse.chunks (6) and ChunkBatch.column_data (12).
_KEY_INSERT_REQUEST_CHUNKS = bytes([(1 << 3) | 2])
_KEY_SAMPLE_RESPONSE_CHUNKS = bytes([(6 << 3) | 2])
_KEY_CHUNK_BATCH_COLUMN_DATA = bytes([(12 << 3) | 2])


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _serialize_with_trailing_columns(head: bytes, chunks_key: bytes, column_data: Sequence) -> bytes:
    """`head` followed by `column_data` as one more occurrence of the `chunks` field; every
    payload is copied once, by the final join."""
    if not column_data:
        return head
    parts = [head, chunks_key, b""]
    inner_size = 0
    for blob in column_data:
        size = _varint(len(blob))
        parts += (_KEY_CHUNK_BATCH_COLUMN_DATA, size, blob)
        inner_size += 1 + len(size) + len(blob)
    parts[2] = _varint(inner_size)
    return b"".join(parts)


def serialize_insert_request(packed: PackedInsertRequest) -> bytes:
    """The wire bytes of a `PackedInsertRequest` (gRPC request serializer of InsertStream)."""
    return _serialize_with_trailing_columns(
        packed.request.SerializeToString(), _KEY_INSERT_REQUEST_CHUNKS, packed.column_data)


def serialize_sample_response(packed: PackedSampleResponse) -> bytes:
    """The wire bytes of a `PackedSampleResponse` (gRPC response serializer of SampleStream)."""
    return _serialize_with_trailing_columns(
        packed.response.SerializeToString(), _KEY_SAMPLE_RESPONSE_CHUNKS, packed.column_data)


def _read_varint(view: memoryview, position: int, end: int) -> Tuple[int, int]:
    """(value, next position) of the varint at `position`; (-1, end) when it runs past `end`."""
    value = shift = 0
    while position < end:
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    return -1, end


def _trailer_bounds(view: memoryview, chunks_key: int) -> Optional[Tuple[int, int]]:
    """(field start, body start) of the message's last field when it is a `chunks`
    occurrence (the layout `serialize_sample_response` writes), else None."""
    end = len(view)
    position = 0
    trailer = None
    while position < end:
        field_start = position
        key, position = _read_varint(view, position, end)
        wire_type = key & 7
        body_start = position
        if wire_type == 2:
            length, position = _read_varint(view, position, end)
            if length < 0 or position + length > end:
                return None
            body_start = position
            position += length
        elif wire_type == 0:
            _, position = _read_varint(view, position, end)
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            return None
        trailer = (field_start, body_start) if key == chunks_key else None
    return trailer if position == end else None


def _column_views(view: memoryview, position: int) -> Optional[List[memoryview]]:
    """Views of the `column_data` entries from `position` to the end, or None when something
    else is there too."""
    end = len(view)
    column_key = _KEY_CHUNK_BATCH_COLUMN_DATA[0]
    columns = []
    while position < end:
        if view[position] != column_key:
            return None
        length, position = _read_varint(view, position + 1, end)
        if length < 0 or position + length > end:
            return None
        columns.append(view[position:position + length])
        position += length
    return columns


# Below this mean column size, parsing the whole message in C beats walking its columns in Python.
_MIN_VIEWED_COLUMN_BYTES = 2048


def parse_sample_response(data: bytes) -> PackedSampleResponse:
    """Reads SampleStream response bytes (the gRPC response deserializer of SampleStream).

    Bytes in the layout `serialize_sample_response` writes keep their column data as views
    into `data` when the columns are large enough for that to pay; small columns and any other
    valid encoding are parsed whole (column data is then copied out of the message).

    Raises:
      google.protobuf.message.DecodeError: the bytes are not a SampleResponse.
    """
    view = memoryview(data)
    trailer = _trailer_bounds(view, _KEY_SAMPLE_RESPONSE_CHUNKS[0])
    if trailer is not None:
        response = replay_pb2.SampleResponse.FromString(view[:trailer[0]])
        num_columns = len(response.chunks.flags)
        if (not response.chunks.column_data and num_columns
                and len(view) - trailer[1] >= num_columns * _MIN_VIEWED_COLUMN_BYTES):
            columns = _column_views(view, trailer[1])
            if columns is not None:
                return PackedSampleResponse(response, columns)
    response = replay_pb2.SampleResponse.FromString(data)
    column_data = list(response.chunks.column_data)
    response.chunks.ClearField("column_data")
    return PackedSampleResponse(response, column_data)


def _check_lengths(what: str, expected: int, **fields: Sequence) -> None:
    for name, values in fields.items():
        if len(values) != expected:
            raise errors.InvalidArgumentError(
                f"malformed {what}: field {name} has {len(values)} entries but {expected} are needed; "
                "the sender is broken or speaks another protocol version")


def validate_chunk(chunk: Chunk) -> None:
    """`Chunk.validate`: the server runs it on every chunk it receives, so that everything it
    stores can be sampled.

    Raises: as `Chunk.validate`.
    """
    chunk.validate()


def decode_chunks(batch: replay_pb2.ChunkBatch, validate: bool = True,
                  column_data: Optional[Sequence] = None) -> List[Chunk]:
    """Builds the chunks of a `ChunkBatch` without decompressing them; `column_data` replaces
    `batch.column_data` when the bytes travelled outside the message (`PackedSampleResponse`).

    Raises:
      InvalidArgumentError: the batch's parallel fields disagree, or a chunk is malformed.
      DataLossError: a column's bytes do not match its checksum or declared size (with `validate`).
    """
    keys = list(batch.keys)
    if not keys:
        return []
    n = len(keys)
    num_columns = list(batch.num_columns)
    episode_ids, start_indices, lengths = batch.episode_ids, batch.start_indices, batch.lengths
    _check_lengths("chunk batch", n, episode_ids=episode_ids, start_indices=start_indices,
                   lengths=lengths, num_columns=num_columns)
    total_columns = sum(num_columns)
    if any(c <= 0 for c in num_columns):
        raise errors.InvalidArgumentError("malformed chunk batch: a chunk has no columns")
    dtype_index, ranks, flags = list(batch.dtype_index), list(batch.ranks), list(batch.flags)
    crcs = list(batch.crc32)
    blobs = list(batch.column_data if column_data is None else column_data)
    _check_lengths("chunk batch", total_columns, dtype_index=dtype_index, ranks=ranks, flags=flags,
                   crc32=crcs, column_data=blobs)
    dtypes = list(batch.dtypes)
    if any(not 0 <= i < len(dtypes) for i in dtype_index) or any(r < 0 for r in ranks):
        raise errors.InvalidArgumentError("malformed chunk batch: a dtype index or a rank is out of range")
    shape_dims = list(batch.shape_dims)
    _check_lengths("chunk batch", sum(ranks), shape_dims=shape_dims)
    chunks = []
    column_i = dim_i = 0
    for i in range(n):
        columns = []
        for _ in range(num_columns[i]):
            rank, flag = ranks[column_i], flags[column_i]
            columns.append(ColumnData(
                dtypes[dtype_index[column_i]], tuple(shape_dims[dim_i:dim_i + rank]), blobs[column_i],
                bool(flag & FLAG_COMPRESSED), bool(flag & FLAG_DELTA), crcs[column_i]))
            column_i += 1
            dim_i += rank
        chunk = Chunk(keys[i], columns, lengths[i], episode_ids[i], start_indices[i])
        if validate:
            validate_chunk(chunk)
        chunks.append(chunk)
    return chunks


# ---------------------------------------------------------------------------------------------
# Items


ItemRow = Tuple[str, int, float, Sequence[TrajectoryColumn]]
"""One new item for `encode_item_rows`: (table, key, priority, columns)."""


def _encode_item_rows(rows: Iterable[ItemRow], batch: replay_pb2.ItemBatch,
                      with_slices: bool = True) -> bool:
    """Writes `rows` into the packed per-item, per-column and per-slice lists of an empty
    `batch`; without `with_slices` only the column counts. Returns whether there was a row."""
    tables: Dict[str, int] = {}
    table_index, keys, priorities, num_columns, squeeze, num_slices = [], [], [], [], [], []
    slice_keys, slice_offsets, slice_lengths, slice_indices = [], [], [], []
    for table, key, priority, columns in rows:
        index = tables.get(table)
        if index is None:
            index = tables[table] = len(tables)
        table_index.append(index)
        keys.append(key)
        priorities.append(priority)
        num_columns.append(len(columns))
        for column_squeeze, slices in columns if with_slices else ():
            squeeze.append(column_squeeze)
            num_slices.append(len(slices))
            for chunk_key, offset, length, column_index in slices:
                slice_keys.append(chunk_key)
                slice_offsets.append(offset)
                slice_lengths.append(length)
                slice_indices.append(column_index)
    if not keys:
        return False
    batch.tables.extend(tables)
    batch.table_index.extend(table_index)
    batch.keys.extend(keys)
    batch.priorities.extend(priorities)
    batch.num_columns.extend(num_columns)
    batch.squeeze.extend(squeeze)
    batch.num_slices.extend(num_slices)
    batch.slice_chunk_keys.extend(slice_keys)
    batch.slice_offsets.extend(slice_offsets)
    batch.slice_lengths.extend(slice_lengths)
    batch.slice_indices.extend(slice_indices)
    return True


def encode_item_rows(rows: Iterable[ItemRow], batch: replay_pb2.ItemBatch) -> None:
    """Appends new items given as plain tuples (see `ItemRow`) to an empty `batch`.

    The writers' path: it encodes the same message as `encode_items` without building `Item`
    objects that only the receiving side needs.
    """
    _encode_item_rows(rows, batch)


def encode_items(items: Iterable[Tuple[str, Item]], batch: replay_pb2.ItemBatch,
                 with_state: bool = False, with_slices: bool = True) -> None:
    """Appends (table name, item) pairs to an empty `batch`; `with_state` also writes
    times_sampled and inserted_at (checkpoints and sample responses); without `with_slices`
    the columns' squeeze flags and slices are left out (columnar sample responses)."""
    items = list(items)
    rows = ((table, item.key, item.priority, item.trajectory) for table, item in items)
    if _encode_item_rows(rows, batch, with_slices) and with_state:
        batch.times_sampled.extend([item.times_sampled for _, item in items])
        batch.inserted_at.extend([item.inserted_at for _, item in items])


def decode_items(batch: replay_pb2.ItemBatch, resolve_chunk: Callable[[int], Chunk],
                 with_state: bool = False) -> List[Tuple[str, Item]]:
    """Builds (table name, Item) pairs; `resolve_chunk(key)` returns the chunk for a key.

    Only the message's structure is checked here; `Item.validate` (run by the table) checks the
    priorities and slices.

    Raises:
      InvalidArgumentError: the batch's parallel fields disagree, or a table index is out of range.
      NotFoundError: from `resolve_chunk`, for a chunk that was never sent or was released.
    """
    keys = list(batch.keys)
    if not keys:
        return []
    n = len(keys)
    tables = list(batch.tables)
    table_index, priorities = list(batch.table_index), list(batch.priorities)
    num_columns = list(batch.num_columns)
    _check_lengths("item batch", n, table_index=table_index, priorities=priorities,
                   num_columns=num_columns)
    if any(not 0 <= t < len(tables) for t in table_index):
        raise errors.InvalidArgumentError("malformed item batch: a table index is out of range")
    if any(c <= 0 for c in num_columns):
        raise errors.InvalidArgumentError("malformed item batch: an item has no columns")
    squeeze, num_slices = list(batch.squeeze), list(batch.num_slices)
    _check_lengths("item batch", sum(num_columns), squeeze=squeeze, num_slices=num_slices)
    if any(s <= 0 for s in num_slices):
        raise errors.InvalidArgumentError("malformed item batch: an item column has no chunk slices")
    slice_keys, slice_offsets = list(batch.slice_chunk_keys), list(batch.slice_offsets)
    slice_lengths, slice_indices = list(batch.slice_lengths), list(batch.slice_indices)
    _check_lengths("item batch", sum(num_slices), slice_offsets=slice_offsets,
                   slice_lengths=slice_lengths, slice_indices=slice_indices, slice_chunk_keys=slice_keys)
    if with_state:
        times_sampled, inserted_at = list(batch.times_sampled), list(batch.inserted_at)
        _check_lengths("item batch", n, times_sampled=times_sampled, inserted_at=inserted_at)
    # Build every slice and column of the message in one pass each (list comprehensions over
    # the parallel fields), then cut them per item: per-item Python work is what limits the
    # server's insert rate for small items.
    all_slices = list(zip(slice_keys, slice_offsets, slice_lengths, slice_indices))
    one_slice_per_column = len(all_slices) == len(squeeze)  # (num_slices are all >= 1)
    if one_slice_per_column:
        all_columns = [(q, (s,)) for s, q in zip(all_slices, squeeze)]
    else:
        all_columns, slice_i = [], 0
        for count, q in zip(num_slices, squeeze):
            all_columns.append((q, tuple(all_slices[slice_i:slice_i + count])))
            slice_i += count
    resolved: Dict[int, Chunk] = {}  # each chunk key is resolved once per message
    single_chunk: Dict[int, Dict[int, Chunk]] = {}

    def chunks_of(keys) -> Dict[int, Chunk]:
        item_chunks = {}
        for chunk_key in keys:
            if chunk_key not in item_chunks:
                chunk = resolved.get(chunk_key)
                if chunk is None:
                    chunk = resolved[chunk_key] = resolve_chunk(chunk_key)
                item_chunks[chunk_key] = chunk
        return item_chunks

    out = []
    column_i = slice_i = 0
    now = time.time()  # one insertion time per message: Item() would call time.time() per item
    for i in range(n):
        columns_end = column_i + num_columns[i]
        trajectory = all_columns[column_i:columns_end]
        slices_end = columns_end if one_slice_per_column else slice_i + sum(
            num_slices[column_i:columns_end])
        item_keys = slice_keys[slice_i:slices_end]
        first_key = item_keys[0]
        if item_keys.count(first_key) == len(item_keys):  # the usual case: one chunk
            item_chunks = single_chunk.get(first_key)
            if item_chunks is None:
                chunk = resolved.get(first_key)
                if chunk is None:
                    chunk = resolved[first_key] = resolve_chunk(first_key)
                # shared by this message's items of the chunk: one tracked dict, not one per item
                item_chunks = single_chunk[first_key] = {first_key: chunk}
        else:
            item_chunks = chunks_of(item_keys)
        column_i, slice_i = columns_end, slices_end
        if with_state:
            item = Item(keys[i], priorities[i], trajectory, item_chunks, times_sampled[i], inserted_at[i])
        else:
            item = Item(keys[i], priorities[i], trajectory, item_chunks, 0, now)
        out.append((tables[table_index[i]], item))
    return out


def resolver(chunks: Dict[int, Chunk], what: str = "this message") -> Callable[[int], Chunk]:
    """A `resolve_chunk` over a dict, raising NotFoundError naming the missing key."""

    def resolve(key: int) -> Chunk:
        chunk = chunks.get(key)
        if chunk is None:
            raise errors.NotFoundError(
                f"an item references chunk {key}, which is not in {what}; send every chunk before or "
                "with the first item that references it")
        return chunk

    return resolve


# ---------------------------------------------------------------------------------------------
# Priorities, signatures, table info


def check_priority(key: int, priority: float) -> None:
    """Raises InvalidArgumentError unless `priority` is finite and >= 0."""
    if not (priority >= 0.0) or priority == float("inf"):
        raise errors.InvalidArgumentError(
            f"item {key}: priority must be a finite number >= 0, got {priority}")


def check_key(key: int) -> None:
    """Raises InvalidArgumentError unless `key` fits an unsigned 64-bit integer."""
    if not 0 <= key <= _UINT64_MAX:
        raise errors.InvalidArgumentError(f"item key {key} does not fit an unsigned 64-bit integer")


def signature_to_json(signature) -> Optional[object]:
    """A JSON-able nest of TensorSpec dicts (None stays None)."""
    if signature is None:
        return None
    return tree.map_structure(lambda s: s.to_dict(), specs.as_signature(signature))


def signature_from_json(value) -> Optional[object]:
    """Inverse of `signature_to_json`: dicts with exactly shape/dtype/name become TensorSpecs."""
    if value is None:
        return None

    def build(node):
        if isinstance(node, dict) and set(node) <= {"shape", "dtype", "name"} and "dtype" in node \
                and "shape" in node:
            return specs.TensorSpec.from_dict(node)
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [build(v) for v in node]
        raise errors.InvalidArgumentError(f"cannot read a signature leaf from {node!r}")

    return build(value)


def json_dumps(value) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.dtype):
        return value.str
    if isinstance(value, specs.TensorSpec):
        return value.to_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {value!r}")
