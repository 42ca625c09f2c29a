"""Items: what a table holds. An item is a key, a priority and a trajectory of chunk slices.

The trajectory has one entry per column of the table's signature: a squeeze flag and a tuple
of (chunk_key, offset, length, index) slices that, concatenated, give that column's steps. Items
hold strong references to their chunks, so a chunk lives exactly while some item (or a writer
that keeps it alive) references it; see `replay.chunk_store`.
"""
from __future__ import annotations

import time
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from replay import errors, specs
from replay.chunks import Chunk


ChunkSlice = Tuple[int, int, int, int]
"""(chunk_key, offset, length, index): steps [offset, offset + length) of column `index` of
chunk `chunk_key`."""

TrajectoryColumn = Tuple[bool, Tuple[ChunkSlice, ...]]
"""(squeeze, slices): one column of an item. Its slices, concatenated, give the column's steps;
`squeeze` drops the time dimension of a single-step column.

Both are plain tuples of ints and bools on purpose. CPython's cyclic garbage collector stops
tracking such tuples, so a table of a million items adds almost nothing to a full collection.
As frozen dataclasses they were about 24 tracked objects per item. With a 50k-item table in a
learner's process, every full collection then took 0.3-0.5 s, several times a minute."""


def column_length(column: TrajectoryColumn) -> int:
    """Steps in a trajectory column."""
    return sum(length for _, _, length, _ in column[1])


def trajectory_from_chunks(chunks: Sequence[Chunk], offset: int, length: int) -> Tuple[TrajectoryColumn, ...]:
    """The usual trajectory: the same `length` steps of every column, starting at `offset` in
    the first of `chunks` (consecutive chunks of one stream)."""
    columns = []
    num_columns = len(chunks[0].columns)
    for index in range(num_columns):
        slices, remaining, start = [], length, offset
        for chunk in chunks:
            if remaining <= 0:
                break
            take = min(chunk.length - start, remaining)
            if take > 0:
                slices.append((chunk.key, start, take, index))
                remaining -= take
            start = max(0, start - chunk.length)
        if remaining:
            raise errors.InvalidArgumentError(
                f"the chunks hold fewer than {length} steps from offset {offset}")
        columns.append((False, tuple(slices)))
    return tuple(columns)


_UNKNOWN = object()
_IN_SLOTS = object()  # `Item.span` is in the item's _span_* slots (items of `span_items`)


def _whole_chunk_span(trajectory, chunks) -> Optional[Tuple[int, int, int, int]]:
    """`Item.span` of a trajectory (None when it does not have that layout)."""
    if not trajectory or len(trajectory[0][1]) != 1:
        return None
    chunk_key, offset, length, _ = trajectory[0][1][0]
    chunk = chunks.get(chunk_key)
    if chunk is None or len(chunk.columns) != len(trajectory):
        return None
    mask = 0
    for index, (squeeze, slices) in enumerate(trajectory):
        if slices != ((chunk_key, offset, length, index),):
            return None
        if squeeze:
            mask |= 1 << index
    return chunk_key, offset, length, mask


class Item:
    """A table entry. `trajectory` is a tuple of `TrajectoryColumn`s (plain tuples, see there);
    `chunks` maps chunk key to the chunk for every key the trajectory uses. Items never modify
    `chunks`, so items of the same chunk may share one mapping.

    `span` is (chunk_key, offset, length, squeeze_mask) when column i of the trajectory is
    exactly steps [offset, offset + length) of column i of one chunk that has no other columns
    (what writers produce for step and sequence items; bit i of the mask is column i's squeeze
    flag), else None. Columnar sample responses use it to copy an item's steps in one slice.

    Items made by `span_items` (the server's insert path for such items) hold only the span and
    its chunk; their `trajectory` and `chunks` are built when first read (see there).
    """

    __slots__ = ("key", "priority", "_trajectory", "_chunks", "times_sampled", "inserted_at", "_span",
                 "_span_chunk", "_span_offset", "_span_length", "_span_mask")

    def __init__(self, key: int, priority: float, trajectory: Sequence[TrajectoryColumn],
                 chunks: Dict[int, Chunk], times_sampled: int = 0, inserted_at: Optional[float] = None):
        self.key = int(key)
        self.priority = float(priority)
        self._trajectory = tuple(trajectory)
        self._chunks = chunks
        self.times_sampled = int(times_sampled)
        self.inserted_at = time.time() if inserted_at is None else float(inserted_at)
        self._span = _UNKNOWN
        self._span_chunk = None

    @property
    def trajectory(self) -> Tuple[TrajectoryColumn, ...]:
        trajectory = self._trajectory
        if trajectory is None:
            chunk_key, offset, length, mask = self.span
            trajectory = self._trajectory = tuple(
                (bool(mask >> index & 1), ((chunk_key, offset, length, index),))
                for index in range(self._span_chunk.num_columns))
        return trajectory

    @property
    def chunks(self) -> Dict[int, Chunk]:
        chunks = self._chunks
        if chunks is None:
            chunk = self._span_chunk
            chunks = self._chunks = {chunk.key: chunk}
        return chunks

    @property
    def span(self) -> Optional[Tuple[int, int, int, int]]:
        # Worked out on first use (the first columnar sample), not per insert: most items of a
        # table that is written fast are evicted before anyone samples them.
        span = self._span
        if span is _UNKNOWN:
            span = self._span = _whole_chunk_span(self._trajectory, self._chunks)
        elif span is _IN_SLOTS:
            span = self._span = (self._span_chunk.key, self._span_offset, self._span_length, self._span_mask)
        return span

    @property
    def span_chunk(self) -> Optional[Chunk]:
        """The chunk of `span` (None where `span` is None)."""
        chunk = self._span_chunk
        if chunk is None:
            span = self.span
            if span is not None:
                chunk = self._chunks[span[0]]
        return chunk

    def validate(self) -> None:
        """Checks the key, the priority and that every slice lies inside a chunk the item holds.

        Raises:
          InvalidArgumentError: bad priority, empty trajectory or column, slice out of range,
            a squeezed column longer than one step, or columns mixing dtypes or step shapes.
          NotFoundError: a slice names a chunk the item does not hold.
        """
        if not (self.priority >= 0.0) or self.priority == float("inf"):
            raise errors.InvalidArgumentError(
                f"item {self.key}: priority must be a finite number >= 0, got {self.priority}")
        # What writers send: one slice of one chunk, the same in every column. Items of
        # `span_items` are read from their slots, without building the span tuple.
        if self._span is _IN_SLOTS:
            chunk, offset, length = self._span_chunk, self._span_offset, self._span_length
            squeeze_mask = self._span_mask
        else:
            span = self.span
            chunk = None if span is None else self.span_chunk
            if chunk is not None:
                _, offset, length, squeeze_mask = span
        if chunk is not None and offset >= 0 and 0 < length and offset + length <= chunk.length \
                and (length == 1 or not squeeze_mask):
            return  # else the checks below name what is wrong
        if not self.trajectory:
            raise errors.InvalidArgumentError(f"item {self.key}: the trajectory has no columns")
        for c, (squeeze, slices) in enumerate(self.trajectory):
            if not slices:
                raise errors.InvalidArgumentError(f"item {self.key}: column {c} has no chunk slices")
            if squeeze and column_length((squeeze, slices)) != 1:
                raise errors.InvalidArgumentError(
                    f"item {self.key}: column {c} is squeezed but spans "
                    f"{column_length((squeeze, slices))} steps (must be 1)")
            first = None
            for chunk_key, offset, length, index in slices:
                chunk = self.chunks.get(chunk_key)
                if chunk is None:
                    raise errors.NotFoundError(
                        f"item {self.key}: column {c} references chunk {chunk_key}, which was never sent "
                        "or is no longer kept alive; send the chunk before (or with) the item")
                if offset < 0 or length <= 0 or offset + length > chunk.length:
                    raise errors.InvalidArgumentError(
                        f"item {self.key}: column {c} slice [{offset}, {offset + length}) lies outside "
                        f"chunk {chunk_key} of {chunk.length} steps")
                if not 0 <= index < len(chunk.columns):
                    raise errors.InvalidArgumentError(
                        f"item {self.key}: column {c} names column {index} of chunk {chunk_key}, which has "
                        f"{len(chunk.columns)} columns")
                data = chunk.columns[index]
                if first is None:
                    first = (data.dtype, data.shape)
                elif first != (data.dtype, data.shape):
                    raise errors.InvalidArgumentError(
                        f"item {self.key}: column {c} mixes dtype/shape {first} and {(data.dtype, data.shape)}")

    def column_specs(self) -> list:
        """(shape, dtype) of each column as it will be decoded."""
        chunk = self.span_chunk
        if chunk is not None:
            _, _, length, mask = self.span
            return [(tuple(data.shape) if mask >> index & 1 else (length,) + tuple(data.shape),
                     specs.parse_dtype(data.dtype)) for index, data in enumerate(chunk.columns)]
        out = []
        for column in self.trajectory:
            squeeze, ((chunk_key, _, _, index), *_) = column
            data = self.chunks[chunk_key].columns[index]
            shape = tuple(data.shape) if squeeze else (column_length(column),) + tuple(data.shape)
            out.append((shape, specs.parse_dtype(data.dtype)))
        return out

    @property
    def nbytes(self) -> int:
        """Stored bytes of the chunks this item references."""
        return sum(c.nbytes for c in self.chunks.values())

    def decode(self, cache: Optional[dict] = None) -> list:
        """The item's flat columns as numpy arrays. `cache` ((chunk_key, index) -> array) lets
        callers decoding many items decompress each chunk column once."""
        cache = {} if cache is None else cache
        out = []
        for squeeze, slices in self.trajectory:
            parts = []
            for chunk_key, offset, length, index in slices:
                arr = cache.get((chunk_key, index))
                if arr is None:
                    arr = self.chunks[chunk_key].column(index)
                    cache[(chunk_key, index)] = arr
                parts.append(arr[offset:offset + length])
            value = parts[0] if len(parts) == 1 else np.concatenate(parts)
            out.append(value[0] if squeeze else value)
        return out

    def __repr__(self) -> str:
        return f"Item(key={self.key}, priority={self.priority}, times_sampled={self.times_sampled})"


def span_items(keys: Sequence[int], priorities: Sequence[float], chunks: Sequence[Chunk],
               offsets: Sequence[int], lengths: Sequence[int], squeeze_masks: Sequence[int],
               inserted_at: float) -> list:
    """New items, item i covering steps [offsets[i], offsets[i] + lengths[i]) of every column of
    chunks[i] (`Item.span` layout; bit j of squeeze_masks[i] squeezes column j), inserted at
    `inserted_at`. Keys and lengths must be ints and priorities floats; `Item.validate` checks
    the values.

    Each such item is one object: its span lies in slots until `span` is first read. Built as
    `Item(...)` is, it would also be its trajectory's nested tuples, a chunk mapping and the
    span tuple. A server inserts one per step it is sent and, with a full table, evicts one:
    every object of an item is an allocation, a walk by the garbage collector before the
    server's policy freezes it (`replay.gc_freeze`), and a cache miss when it is freed."""
    new = Item.__new__
    out = []
    append = out.append
    for key, priority, chunk, offset, length, mask in zip(keys, priorities, chunks, offsets, lengths,
                                                          squeeze_masks):
        item = new(Item)
        item.key = key
        item.priority = priority
        item._trajectory = item._chunks = None  # noqa: SLF001 - this module's class
        item.times_sampled = 0
        item.inserted_at = inserted_at
        item._span = _IN_SLOTS  # noqa: SLF001
        item._span_chunk = chunk  # noqa: SLF001
        item._span_offset = offset  # noqa: SLF001
        item._span_length = length  # noqa: SLF001
        item._span_mask = mask  # noqa: SLF001
        append(item)
    return out


def span_fields(items: Sequence[Item]) -> Optional[tuple]:
    """(keys, priorities, chunks, offsets, lengths, squeeze_masks) of `items` when every one
    was made by `span_items` (the arguments it was given, read from the items' slots without
    building their spans or trajectories), else None."""
    chunks = [item._span_chunk for item in items]  # noqa: SLF001 - this module's class
    if not chunks or any(chunk is None for chunk in chunks):
        return None
    return ([item.key for item in items], [item.priority for item in items], chunks,
            [item._span_offset for item in items], [item._span_length for item in items],  # noqa: SLF001
            [item._span_mask for item in items])  # noqa: SLF001
