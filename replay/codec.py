"""Conversion between the replay data model (Chunk, Item) and the packed wire batches.

Sits between `replay.proto` (the service definition) and the server, client, writers and
checkpoints, which all speak the same packed `ChunkBatch` / `ItemBatch` messages (the columnar
`ColumnBatch` of sample responses is `replay.column_batch`; the hand-written framing that keeps
chunk bytes outside the messages is `replay.framing`). Encoding appends to plain lists and sets
each repeated field once, so the per-item cost is a few list appends; decoding validates every
incoming message's structure (`replay.validation`) before building anything, so a malformed
message raises a named error (and is rejected with the matching gRPC status) instead of
corrupting stored data.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from replay import errors
from replay.checksum import crc32
from replay.chunks import (Chunk, ColumnData, built_chunks, column_step_bytes, one_column_chunks,
                           one_column_layout)
from replay.items import Item, TrajectoryColumn, span_fields, span_items
from replay.proto import replay_pb2
from replay.validation import check_field_lengths, validate_chunk

# Bits of ChunkBatch.flags.
FLAG_COMPRESSED = 1
FLAG_DELTA = 2


# ---------------------------------------------------------------------------------------------
# Chunks


class ChunkRow(NamedTuple):
    """A chunk on its way out, for `ChunkBatchBuilder.add`: what a writer knows of a chunk it
    has just encoded, with `Chunk`'s attribute names, built without `Chunk`'s conversions (a
    writer makes one per chunk it sends)."""

    key: int
    episode_id: int
    start_index: int
    length: int
    columns: Sequence[ColumnData]
    nbytes: int


class ChunkBatchBuilder:
    """A `ChunkBatch` under construction: the packed fields as plain lists, filled chunk by
    chunk and written into a message once (`write_to`). Writers fill one per message as they
    send, so what waits in their queues is lists of ints and bytes: no objects per chunk for
    the garbage collector to walk."""

    __slots__ = ("keys", "episode_ids", "start_indices", "lengths", "num_columns", "dtypes",
                 "dtype_index", "ranks", "shape_dims", "flags", "crcs", "blobs", "nbytes")

    def __init__(self):
        self.keys, self.episode_ids, self.start_indices, self.lengths = [], [], [], []
        self.num_columns, self.dtype_index, self.ranks, self.shape_dims = [], [], [], []
        self.flags, self.crcs, self.blobs = [], [], []
        self.dtypes: Dict[str, int] = {}
        self.nbytes = 0  # of column data

    def add(self, chunks: Iterable[Union[Chunk, ChunkRow]]) -> None:
        """Appends `chunks`."""
        dtypes, dtype_index, ranks, shape_dims = self.dtypes, self.dtype_index, self.ranks, self.shape_dims
        flags, crcs, blobs = self.flags, self.crcs, self.blobs
        nbytes = 0
        for chunk in chunks:
            self.keys.append(chunk.key)
            self.episode_ids.append(chunk.episode_id)
            self.start_indices.append(chunk.start_index)
            self.lengths.append(chunk.length)
            columns = chunk.columns
            self.num_columns.append(len(columns))
            for dtype, shape, data, compressed, delta_encoded, crc in columns:  # (ColumnData)
                index = dtypes.get(dtype)
                if index is None:
                    index = dtypes[dtype] = len(dtypes)
                dtype_index.append(index)
                ranks.append(len(shape))
                shape_dims.extend(shape)
                flags.append((FLAG_COMPRESSED if compressed else 0) | (FLAG_DELTA if delta_encoded else 0))
                crcs.append(crc)
                blobs.append(data)
                nbytes += len(data)
        self.nbytes += nbytes

    def __len__(self) -> int:
        return len(self.keys)

    def write_to(self, batch: replay_pb2.ChunkBatch, column_data: Optional[List[bytes]] = None) -> None:
        """Sets the fields of an empty `batch` (see `encode_chunks` for `column_data`)."""
        if not self.keys:
            return
        batch.keys.extend(self.keys)
        batch.episode_ids.extend(self.episode_ids)
        batch.start_indices.extend(self.start_indices)
        batch.lengths.extend(self.lengths)
        batch.num_columns.extend(self.num_columns)
        batch.dtypes.extend(self.dtypes)
        batch.dtype_index.extend(self.dtype_index)
        batch.ranks.extend(self.ranks)
        batch.shape_dims.extend(self.shape_dims)
        batch.flags.extend(self.flags)
        batch.crc32.extend(self.crcs)
        if column_data is None:
            # protobuf takes only bytes: a disk-backed store's columns are memoryviews
            batch.column_data.extend([blob if type(blob) is bytes else bytes(blob) for blob in self.blobs])
        else:
            column_data.extend(self.blobs)


def encode_chunks(chunks: Iterable[Chunk], batch: replay_pb2.ChunkBatch,
                  column_data: Optional[List[bytes]] = None) -> None:
    """Appends `chunks` to an empty `batch` (fields are set once, at the end).

    With a `column_data` list, the columns' bytes are appended to it instead of to
    `batch.column_data` (see `PackedInsertRequest`), which saves copying them into the message.
    """
    builder = ChunkBatchBuilder()
    builder.add(chunks)
    builder.write_to(batch, column_data)


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
    check_field_lengths("chunk batch", n, episode_ids=episode_ids, start_indices=start_indices,
                   lengths=lengths, num_columns=num_columns)
    total_columns = sum(num_columns)
    if min(num_columns) <= 0:  # (min/max: C loops, this runs for every message)
        raise errors.InvalidArgumentError("malformed chunk batch: a chunk has no columns")
    dtype_index, ranks, flags = list(batch.dtype_index), list(batch.ranks), list(batch.flags)
    crcs = list(batch.crc32)
    blobs = list(batch.column_data if column_data is None else column_data)
    check_field_lengths("chunk batch", total_columns, dtype_index=dtype_index, ranks=ranks, flags=flags,
                   crc32=crcs, column_data=blobs)
    dtypes = list(batch.dtypes)
    if min(dtype_index) < 0 or max(dtype_index) >= len(dtypes) or min(ranks) < 0:
        raise errors.InvalidArgumentError("malformed chunk batch: a dtype index or a rank is out of range")
    shape_dims = list(batch.shape_dims)
    check_field_lengths("chunk batch", sum(ranks), shape_dims=shape_dims)
    if n > 1:
        chunks = _decode_uniform_chunks(keys, num_columns, list(episode_ids), list(start_indices),
                                        list(lengths), dtypes, dtype_index, ranks, shape_dims, flags,
                                        crcs, blobs, validate)
        if chunks is not None:
            return chunks
    chunks = []
    column_i = dim_i = 0
    for i in range(n):
        columns = []
        nbytes = 0
        for _ in range(num_columns[i]):
            rank, flag, blob = ranks[column_i], flags[column_i], blobs[column_i]
            columns.append(ColumnData(
                dtypes[dtype_index[column_i]], tuple(shape_dims[dim_i:dim_i + rank]), blob,
                bool(flag & FLAG_COMPRESSED), bool(flag & FLAG_DELTA), crcs[column_i]))
            nbytes += len(blob)
            column_i += 1
            dim_i += rank
        chunk = Chunk(keys[i], columns, lengths[i], episode_ids[i], start_indices[i], nbytes)
        if validate:
            validate_chunk(chunk)
        chunks.append(chunk)
    return chunks


def _decode_uniform_chunks(keys, num_columns, episode_ids, start_indices, lengths, dtypes, dtype_index,
                           ranks, shape_dims, flags, crcs, blobs, validate) -> Optional[List[Chunk]]:
    """The chunks of a batch whose chunks all have the same uncompressed column layouts (what a
    writer sends), built and checked as `decode_chunks` does, with the checks of
    `Chunk.validate` run as a few passes over the whole batch instead of per column: per-chunk
    Python work is what bounds the server's insert rate for small steps. None for any other
    batch, and for one that fails a check (the general path then raises the precise error)."""
    n, c = len(keys), num_columns[0]
    if num_columns.count(c) != n:
        return None
    pattern_ranks = ranks[:c]
    pattern_dims = shape_dims[:sum(pattern_ranks)]
    pattern_dtypes, pattern_flags = dtype_index[:c], flags[:c]
    if (any(pattern_flags) or flags != pattern_flags * n or dtype_index != pattern_dtypes * n
            or ranks != pattern_ranks * n or shape_dims != pattern_dims * n):
        return None
    column_dtypes = [dtypes[i] for i in pattern_dtypes]
    shapes, dim = [], 0
    for rank in pattern_ranks:
        shapes.append(tuple(pattern_dims[dim:dim + rank]))
        dim += rank
    sizes = list(map(len, blobs))
    if validate:
        if min(lengths) <= 0 or list(map(crc32, blobs)) != crcs:
            return None
        for j in range(c):
            try:
                step_bytes = column_step_bytes(column_dtypes[j], shapes[j])
            except errors.InvalidArgumentError:
                return None
            if sizes[j::c] != [step_bytes * length for length in lengths]:
                return None
    if c == 1:
        return one_column_chunks(keys, column_dtypes[0], shapes[0], blobs, crcs, lengths, episode_ids,
                                 start_indices)
    new_column = tuple.__new__  # ColumnData(...) without the named tuple's Python-level __new__
    columns, nbytes = [], []
    for i in range(n):
        base = i * c
        columns.append(tuple(new_column(ColumnData, (column_dtypes[j], shapes[j], blobs[base + j], False, False,
                                                     crcs[base + j])) for j in range(c)))
        nbytes.append(sum(sizes[base:base + c]))
    return built_chunks(keys, columns, lengths, episode_ids, start_indices, nbytes)


# ---------------------------------------------------------------------------------------------
# Items


ItemRow = Tuple[str, int, float, Sequence[TrajectoryColumn]]
"""One new item for `encode_item_rows`: (table, key, priority, columns)."""


class ItemBatchBuilder:
    """An `ItemBatch` under construction, as `ChunkBatchBuilder` is a `ChunkBatch`'s."""

    __slots__ = ("tables", "table_index", "keys", "priorities", "num_columns", "squeeze", "num_slices",
                 "slice_keys", "slice_offsets", "slice_lengths", "slice_indices")

    def __init__(self):
        self.tables: Dict[str, int] = {}
        self.table_index, self.keys, self.priorities, self.num_columns = [], [], [], []
        self.squeeze, self.num_slices = [], []
        self.slice_keys, self.slice_offsets, self.slice_lengths, self.slice_indices = [], [], [], []

    def add(self, rows: Iterable[ItemRow], with_slices: bool = True) -> None:
        """Appends `rows`; without `with_slices` only their column counts, not the columns."""
        tables, table_index, keys, priorities = self.tables, self.table_index, self.keys, self.priorities
        num_columns, squeeze, num_slices = self.num_columns, self.squeeze, self.num_slices
        slice_keys, slice_offsets = self.slice_keys, self.slice_offsets
        slice_lengths, slice_indices = self.slice_lengths, self.slice_indices
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

    def __len__(self) -> int:
        return len(self.keys)

    def write_to(self, batch: replay_pb2.ItemBatch) -> None:
        """Sets the fields of an empty `batch`."""
        if not self.keys:
            return
        batch.tables.extend(self.tables)
        batch.table_index.extend(self.table_index)
        batch.keys.extend(self.keys)
        batch.priorities.extend(self.priorities)
        batch.num_columns.extend(self.num_columns)
        batch.squeeze.extend(self.squeeze)
        batch.num_slices.extend(self.num_slices)
        batch.slice_chunk_keys.extend(self.slice_keys)
        batch.slice_offsets.extend(self.slice_offsets)
        batch.slice_lengths.extend(self.slice_lengths)
        batch.slice_indices.extend(self.slice_indices)


def _encode_item_rows(rows: Iterable[ItemRow], batch: replay_pb2.ItemBatch,
                      with_slices: bool = True) -> bool:
    """Writes `rows` into the packed per-item, per-column and per-slice lists of an empty
    `batch`; without `with_slices` only the column counts. Returns whether there was a row."""
    builder = ItemBatchBuilder()
    builder.add(rows, with_slices)
    builder.write_to(batch)
    return len(builder) > 0


def encode_item_rows(rows: Iterable[ItemRow], batch: replay_pb2.ItemBatch) -> None:
    """Appends new items given as plain tuples (see `ItemRow`) to an empty `batch`.

    The writers' path: it encodes the same message as `encode_items` without building `Item`
    objects that only the receiving side needs.
    """
    _encode_item_rows(rows, batch)


def encode_span_sample(table: str, items: Sequence[Item], item_batch: replay_pb2.ItemBatch,
                       chunk_batch: replay_pb2.ChunkBatch, column_data: List[bytes]) -> Optional[int]:
    """The server's sample responses of step and sequence items: when every item was made by
    `items.span_items` and their chunks each hold one uncompressed column of one dtype and
    shape, writes what `encode_items((table, item) ...)` and `encode_chunks(their chunks, ...,
    column_data)` write, through the same builders with their lists made from the items' and
    chunks' slots, and returns the
    chunks' bytes; else writes nothing and returns None. Each chunk is written once however
    many items share it, in the order of its first item."""
    fields = span_fields(items)
    if fields is None:
        return None
    keys, priorities, chunks, offsets, lengths, masks = fields
    unique = list({chunk.key: chunk for chunk in chunks}.values())
    layout = one_column_layout(unique)
    if layout is None:
        return None
    dtype, shape, blobs, crcs = layout
    n, m = len(keys), len(unique)
    chunk_builder = ChunkBatchBuilder()
    chunk_builder.keys = [chunk.key for chunk in unique]
    chunk_builder.episode_ids = [chunk.episode_id for chunk in unique]
    chunk_builder.start_indices = [chunk.start_index for chunk in unique]
    chunk_builder.lengths = [chunk.length for chunk in unique]
    chunk_builder.num_columns = [1] * m
    chunk_builder.dtypes = {dtype: 0}
    chunk_builder.dtype_index = [0] * m
    chunk_builder.ranks = [len(shape)] * m
    chunk_builder.shape_dims = list(shape) * m
    chunk_builder.flags = [0] * m
    chunk_builder.crcs = crcs
    chunk_builder.blobs = blobs
    chunk_builder.write_to(chunk_batch, column_data)
    item_builder = ItemBatchBuilder()
    item_builder.tables = {table: 0}
    item_builder.table_index = [0] * n
    item_builder.keys = keys
    item_builder.priorities = priorities
    item_builder.num_columns = [1] * n
    item_builder.squeeze = [bool(mask & 1) for mask in masks]
    item_builder.num_slices = [1] * n
    item_builder.slice_keys = [chunk.key for chunk in chunks]
    item_builder.slice_offsets = offsets
    item_builder.slice_lengths = lengths
    item_builder.slice_indices = [0] * n
    item_builder.write_to(item_batch)
    return sum(len(blob) for blob in blobs)


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
    check_field_lengths("item batch", n, table_index=table_index, priorities=priorities,
                   num_columns=num_columns)
    if min(table_index) < 0 or max(table_index) >= len(tables):
        raise errors.InvalidArgumentError("malformed item batch: a table index is out of range")
    if min(num_columns) <= 0:
        raise errors.InvalidArgumentError("malformed item batch: an item has no columns")
    squeeze, num_slices = list(batch.squeeze), list(batch.num_slices)
    check_field_lengths("item batch", sum(num_columns), squeeze=squeeze, num_slices=num_slices)
    if min(num_slices) <= 0:
        raise errors.InvalidArgumentError("malformed item batch: an item column has no chunk slices")
    slice_keys, slice_offsets = list(batch.slice_chunk_keys), list(batch.slice_offsets)
    slice_lengths, slice_indices = list(batch.slice_lengths), list(batch.slice_indices)
    check_field_lengths("item batch", sum(num_slices), slice_offsets=slice_offsets,
                   slice_lengths=slice_lengths, slice_indices=slice_indices, slice_chunk_keys=slice_keys)
    if with_state:
        times_sampled, inserted_at = list(batch.times_sampled), list(batch.inserted_at)
        check_field_lengths("item batch", n, times_sampled=times_sampled, inserted_at=inserted_at)
    one_slice_per_column = len(slice_keys) == len(squeeze)  # (num_slices are all >= 1)
    if one_slice_per_column and not with_state:
        items = _decode_span_items(keys, priorities, num_columns, squeeze, slice_keys, slice_offsets,
                                   slice_lengths, slice_indices, resolve_chunk)
        if items is not None:
            return [(tables[t], item) for t, item in zip(table_index, items)]
    # Build every slice and column of the message in one pass each (list comprehensions over
    # the parallel fields), then cut them per item: per-item Python work is what limits the
    # server's insert rate for small items.
    all_slices = list(zip(slice_keys, slice_offsets, slice_lengths, slice_indices))
    if one_slice_per_column:
        all_columns = [(q, (s,)) for s, q in zip(all_slices, squeeze)]
    else:
        all_columns, slice_i = [], 0
        for count, q in zip(num_slices, squeeze):
            all_columns.append((q, tuple(all_slices[slice_i:slice_i + count])))
            slice_i += count
    if one_slice_per_column and not with_state:
        items = _decode_one_chunk_items(keys, priorities, num_columns, all_columns, slice_keys, resolve_chunk)
        if items is not None:
            return [(tables[t], item) for t, item in zip(table_index, items)]
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


def _decode_span_items(keys, priorities, num_columns, squeeze, slice_keys, slice_offsets, slice_lengths,
                       slice_indices, resolve_chunk) -> Optional[List[Item]]:
    """The new items of a batch in which item i's column j is steps [offset_i, offset_i +
    length_i) of column j of one chunk that has as many columns as the item (`Item.span`, what
    writers send for step and sequence items), built by `items.span_items`; None for any other
    batch. Chunks are resolved in item order, so a missing one raises for the first item that
    needs it."""
    n, c = len(keys), num_columns[0]
    if num_columns.count(c) != n:
        return None
    if c == 1:
        if any(slice_indices):
            return None
        chunk_keys, offsets, lengths = slice_keys, slice_offsets, slice_lengths
        masks = list(map(int, squeeze))
    else:
        if slice_indices != list(range(c)) * n:
            return None
        chunk_keys, offsets, lengths = slice_keys[::c], slice_offsets[::c], slice_lengths[::c]
        if any(slice_keys[j::c] != chunk_keys or slice_offsets[j::c] != offsets
               or slice_lengths[j::c] != lengths for j in range(1, c)):
            return None
        masks = [0] * n
        for j in range(c):
            bit = 1 << j
            masks = [mask | bit if q else mask for mask, q in zip(masks, squeeze[j::c])]
    resolved = {key: resolve_chunk(key) for key in dict.fromkeys(chunk_keys)}
    if any(chunk.num_columns != c for chunk in resolved.values()):
        return None
    chunks = [resolved[key] for key in chunk_keys] if len(resolved) != n else list(resolved.values())
    return span_items(keys, priorities, chunks, offsets, lengths, masks, time.time())


def _decode_one_chunk_items(keys, priorities, num_columns, all_columns, slice_keys, resolve_chunk
                            ) -> Optional[List[Item]]:
    """The new items of a batch in which every item has the same number of columns, each one
    slice of the same chunk (but not the layout of `_decode_span_items`), built as
    `decode_items` builds them but without its per-item slicing and lookups; None for any other
    batch."""
    n, c = len(keys), num_columns[0]
    if num_columns.count(c) != n:
        return None
    if c == 1:
        trajectories = [(column,) for column in all_columns]
        chunk_keys = slice_keys
    else:
        chunk_keys = slice_keys[::c]
        if any(slice_keys[j::c] != chunk_keys for j in range(1, c)):
            return None  # an item spans several chunks
        trajectories = [tuple(all_columns[i:i + c]) for i in range(0, n * c, c)]
    # one mapping per chunk, shared by the message's items of that chunk; chunks are resolved
    # in item order, so a missing one raises for the first item that needs it
    mappings = {key: {key: resolve_chunk(key)} for key in dict.fromkeys(chunk_keys)}
    now = time.time()  # one insertion time per message
    return [Item(key, priority, trajectory, mappings[chunk_key], 0, now)
            for key, priority, trajectory, chunk_key in zip(keys, priorities, trajectories, chunk_keys)]


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


def decode_sample_items(packed) -> list:
    """The items of one packed sample response (its chunks decoded, not yet the items' data).

    Uncompressed columns are copied out so that samples do not keep whole responses alive.
    """
    response = packed.response
    column_data = [c if f & FLAG_COMPRESSED else bytes(c)
                   for c, f in zip(packed.column_data, response.chunks.flags)]
    chunks = {c.key: c for c in decode_chunks(response.chunks, validate=False, column_data=column_data)}
    pairs = decode_items(response.items, resolver(chunks, "the sample response"))
    return [item for _, item in pairs]
