"""Chunks: K sequential steps of one stream, stored column-wise and compressed.

This is the storage unit of the replay service (Reverb's "chunk"). A writer stacks each leaf of
K consecutive steps into a column, optionally delta-encodes integer columns along time, and
compresses each column with lz4. Items reference slices of chunks, so experience is stored once
however many items and tables point at it. The server keeps chunks compressed; only small
chunks are decoded on the server, once, when their items are first sampled for a columnar
response (`Chunk.step_records`). A CRC32 of each column's stored bytes lets the server reject
truncated or corrupt chunks without decompressing them.
"""
from __future__ import annotations

import functools
from typing import List, NamedTuple, Optional, Sequence, Tuple

import lz4.block
import numpy as np

from replay import errors, specs
from replay.checksum import crc32

# Columns smaller than this are stored raw: the few bytes lz4 could save cost a decompression
# at every sample of every item that references the column (step items of a 16-step chunk
# each pay for their chunk's whole column), which costs more than sending the bytes.
_MIN_COMPRESS_BYTES = 256

# Chunks of at most this many raw bytes keep their decoded steps once sampled (`step_records`).
# Tables of small steps (DQN's transitions) are sampled many times per insert and an item uses
# a few steps of its chunk, so decoding the chunk at every sample cost more than the item's
# bytes; the copy at most doubles the memory of such small chunks.
_MAX_RECORD_BYTES = 16 * 1024
# `Chunk._records` of chunks whose decoded steps are decoded at each use rather than kept.
_RECORDS_NOT_KEPT = object()
_RECORD_DTYPES: dict = {}  # column layout -> structured dtype, so equal layouts share one object


class ColumnData(NamedTuple):
    """One leaf of a chunk: `length` steps of a `shape`-shaped `dtype` array, as stored bytes.

    Immutable; `_replace` gives a changed copy. A named tuple rather than a frozen dataclass:
    the server and writers build one per column of every chunk, and a frozen dataclass sets
    each field through `object.__setattr__` (0.5 us against 0.2 us a column)."""

    dtype: str  # numpy dtype string, e.g. '<f4'
    shape: Tuple[int, ...]  # shape of one step
    data: bytes
    compressed: bool
    delta_encoded: bool
    crc32: int

    def raw_size(self, length: int) -> int:
        size = np.dtype(self.dtype).itemsize * length
        for d in self.shape:
            size *= d
        return size


def _can_delta_encode(column: np.ndarray) -> bool:
    return column.ndim >= 2 and np.issubdtype(column.dtype, np.integer)


def _delta_encode(column: np.ndarray) -> np.ndarray:
    # Work on the unsigned view: wrap-around subtraction and addition are exact inverses.
    unsigned = column.view(column.dtype.str.replace("i", "u"))
    encoded = unsigned.copy()
    encoded[1:] = unsigned[1:] - unsigned[:-1]
    return encoded.view(column.dtype)


def _delta_decode(column: np.ndarray) -> np.ndarray:
    unsigned = column.view(column.dtype.str.replace("i", "u"))
    return np.cumsum(unsigned, axis=0, dtype=unsigned.dtype).view(column.dtype)


def encode_column(column: np.ndarray, delta_encode: bool = False, compress: bool = True) -> ColumnData:
    """Encodes a stacked column of shape (K, *step_shape).

    Raises:
      InvalidArgumentError: the column holds Python objects (use fixed-width bytes or str).
    """
    column = np.asarray(column)
    if column.dtype.hasobject:
        raise errors.InvalidArgumentError(
            f"cannot store a column of dtype object (shape {column.shape}); convert strings to "
            "fixed-width numpy bytes (np.bytes_) or str (np.str_) arrays"
        )
    if column.ndim == 0:
        raise errors.InvalidArgumentError("a chunk column needs a leading time dimension")
    delta = bool(delta_encode and _can_delta_encode(column))
    if delta:
        column = _delta_encode(column)
    raw = column.tobytes()  # C order, whatever the array's layout
    data, compressed = raw, False
    if compress and len(raw) >= _MIN_COMPRESS_BYTES:
        packed = lz4.block.compress(raw, store_size=True)
        if len(packed) < len(raw):
            data, compressed = packed, True
    return ColumnData(
        dtype=column.dtype.str,
        shape=column.shape[1:],
        data=data,
        compressed=compressed,
        delta_encoded=delta,
        crc32=crc32(data),
    )


def encode_raw_step(step: np.ndarray, dtype_str: Optional[str] = None) -> ColumnData:
    """`encode_column(step[np.newaxis], compress=False)` for one step whose array a writer has
    checked already (its dtype and shape are those of the writer's first step, which
    `encode_column`'s checks passed), without those checks and conversions: the per-step cost
    of writers that store every step as its own chunk. `dtype_str`: `step.dtype.str`, where the
    caller keeps it (numpy builds that string on every access)."""
    raw = step.tobytes()
    return tuple.__new__(ColumnData, (dtype_str or step.dtype.str, step.shape, raw, False, False,
                                      crc32(raw)))


def encode_raw_rows(rows: np.ndarray, dtype_str: Optional[str] = None) -> ColumnData:
    """`encode_column(rows, compress=False)` for a column of steps (shape (K, *step_shape))
    whose dtype and step shape a writer has checked against its first step's (as
    `encode_raw_step`): a batch's column (`TrajectoryWriter.extend`) encoded without the checks
    and conversions. `dtype_str`: `rows.dtype.str`, where the caller keeps it."""
    raw = rows.tobytes()  # C order, whatever the array's layout
    return tuple.__new__(ColumnData, (dtype_str or rows.dtype.str, rows.shape[1:], raw, False, False, crc32(raw)))


def decode_column(column: ColumnData, length: int) -> np.ndarray:
    """Decodes a column into a read-only array of shape (length, *step_shape).

    Raises:
      DataLossError: the bytes are not what the column declares (only for columns that never
        went through `Chunk.validate`, which the server runs on every chunk it receives).
    """
    if column.compressed:
        try:
            raw = lz4.block.decompress(column.data)
        except lz4.block.LZ4BlockError as e:
            raise errors.DataLossError(f"a compressed column is not valid lz4 data: {e}") from None
    else:
        raw = column.data
    try:
        array = np.frombuffer(raw, dtype=specs.parse_dtype(column.dtype)).reshape(
            (length,) + tuple(column.shape))
    except ValueError as e:  # InvalidArgumentError is one too: an unusable dtype
        raise errors.DataLossError(
            f"a column of {len(raw)} bytes does not hold {length} steps of shape {column.shape} and "
            f"dtype {column.dtype!r}: {e}") from None
    if column.delta_encoded:
        array = _delta_decode(array)
        array.flags.writeable = False
    return array


# lz4 spends at least one byte per 255 bytes of a match, so a valid block never expands by more
# than this factor (plus a few bytes of sequence headers).
_MAX_LZ4_RATIO = 255


@functools.lru_cache(maxsize=1024)
def column_step_bytes(dtype: str, shape: Tuple[int, ...], delta_encoded: bool = False) -> int:
    """Bytes per step of a column layout, after checking that it can be decoded (cached: the
    server checks every column it receives and writers send few distinct layouts).

    Raises:
      InvalidArgumentError: a dtype replay does not store, an undecodable shape, or delta
        encoding on a non-integer dtype.
    """
    parsed = specs.parse_dtype(dtype, "dtype")
    specs.check_shape(shape, parsed.itemsize)
    if delta_encoded and parsed.kind not in "iu":
        raise errors.InvalidArgumentError(
            f"is marked delta-encoded but has dtype {parsed.str}; only integer columns are delta-encoded")
    step_bytes = parsed.itemsize
    for d in shape:
        step_bytes *= d
    return step_bytes


def validate_column(column: ColumnData, length: int, what: str = "column") -> None:
    """Checks that `column` decodes to `length` steps of its dtype and shape (see
    `Chunk.validate`); `what` names the column in messages.

    Raises: as `Chunk.validate`.
    """
    try:
        step_bytes = column_step_bytes(column.dtype, tuple(column.shape), column.delta_encoded)
    except errors.InvalidArgumentError as e:
        raise errors.InvalidArgumentError(f"{what}: {e}") from None
    data = column.data
    if crc32(data) != column.crc32:
        raise errors.DataLossError(
            f"{what}: stored bytes do not match their checksum (truncated or corrupt); resend the chunk")
    expected = step_bytes * length
    if column.compressed:
        declared = int.from_bytes(data[:4], "little") if len(data) >= 4 else -1
    else:
        declared = len(data)
    if declared != expected:
        raise errors.DataLossError(
            f"{what}: holds {declared} bytes of data but {length} steps of shape {column.shape} and "
            f"dtype {column.dtype} need {expected}; resend the chunk")
    if column.compressed:
        if expected > _MAX_LZ4_RATIO * len(data) + 64:
            raise errors.InvalidArgumentError(
                f"{what}: {len(data)} compressed bytes cannot hold the {expected} bytes they declare "
                "(not lz4 data); compress columns with lz4.block.compress(data, store_size=True)")
        try:
            lz4.block.decompress(data)  # the C decoder also checks the size it wrote
        except lz4.block.LZ4BlockError as e:
            raise errors.InvalidArgumentError(
                f"{what}: is marked compressed but its bytes are not a valid lz4 block of {expected} "
                f"bytes ({e}); compress columns with lz4.block.compress(data, store_size=True)"
            ) from None


class Chunk:
    """`length` consecutive steps of one episode (from `start_index`), one `ColumnData` per leaf."""

    __slots__ = ("key", "episode_id", "start_index", "length", "_columns", "_records", "nbytes",
                 "_column_dtype", "_column_shape", "_column_data", "_column_crc",
                 "__weakref__")

    def __init__(self, key: int, columns: Sequence[ColumnData], length: int, episode_id: int = 0,
                 start_index: int = 0, nbytes: Optional[int] = None):
        """`nbytes`: the columns' stored bytes where the caller has counted them already."""
        self.key = int(key)
        self._columns = tuple(columns)
        self.length = int(length)
        self.episode_id = int(episode_id)
        self.start_index = int(start_index)
        self._records = None
        # Bytes stored (compressed size), a plain attribute: the server reads it several times
        # for each chunk it is sent
        self.nbytes = sum(len(c.data) for c in self._columns) if nbytes is None else nbytes

    @classmethod
    def from_columns(cls, key: int, columns: Sequence[np.ndarray], episode_id: int = 0,
                     start_index: int = 0, delta_encode: bool = False, compress: bool = True) -> "Chunk":
        """Builds a chunk from flat stacked columns, each of shape (K, *step_shape).

        Raises:
          InvalidArgumentError: no columns, columns of different lengths, or object columns.
        """
        if not columns:
            raise errors.InvalidArgumentError("a chunk needs at least one column")
        lengths = {np.shape(c)[0] if np.ndim(c) else 0 for c in columns}
        if len(lengths) != 1 or 0 in lengths:
            raise errors.InvalidArgumentError(
                f"all columns of a chunk must have the same non-zero number of steps, got {sorted(lengths)}"
            )
        encoded = [encode_column(c, delta_encode, compress) for c in columns]
        return cls(key, encoded, lengths.pop(), episode_id, start_index)

    @classmethod
    def from_steps(cls, key: int, flat_steps: Sequence[Sequence[np.ndarray]], **kwargs) -> "Chunk":
        """Builds a chunk from a list of steps, each a flat list of leaves."""
        columns = [np.stack(leaves) for leaves in zip(*flat_steps)]
        return cls.from_columns(key, columns, **kwargs)

    @property
    def columns(self) -> Tuple[ColumnData, ...]:
        """One `ColumnData` per leaf."""
        columns = self._columns
        if columns is None:  # a chunk of `one_column_chunks`: built when first read
            columns = self._columns = (tuple.__new__(ColumnData, (
                self._column_dtype, self._column_shape, self._column_data, False, False, self._column_crc)),)
        return columns

    @property
    def num_columns(self) -> int:
        """len(columns), without building them."""
        columns = self._columns
        return 1 if columns is None else len(columns)

    def column(self, index: int) -> np.ndarray:
        return decode_column(self.columns[index], self.length)

    def decode(self) -> list:
        return [decode_column(c, self.length) for c in self.columns]

    def step_records(self):
        """The decoded steps as (record dtype, bytes): `length` packed records of a structured
        dtype whose field i holds column i's step, or None for a chunk of more than
        `_MAX_RECORD_BYTES` raw bytes. Decoded on the first call and kept while the chunk lives
        (decoded at every call once the chunk's bytes live on disk: `replace_column_bytes`).
        Chunks of the same column dtypes and shapes share one record dtype object (callers
        compare with `is`). Bytes rather than an array: slicing and joining bytes is what makes
        cutting many items out of many chunks cheap (numpy copies structured arrays field by
        field)."""
        records = self._records
        if records is None or records is _RECORDS_NOT_KEPT:
            layout = tuple((c.dtype, c.shape) for c in self.columns)
            dtype = _RECORD_DTYPES.get(layout)
            if dtype is None:
                dtype = np.dtype([(f"c{i}", specs.parse_dtype(d), shape)
                                  for i, (d, shape) in enumerate(layout)])
                if len(_RECORD_DTYPES) < 1024:
                    dtype = _RECORD_DTYPES.setdefault(layout, dtype)
            if dtype.itemsize * self.length > _MAX_RECORD_BYTES:
                return None
            steps = np.empty(self.length, dtype)
            for i, column in enumerate(self.columns):
                steps[f"c{i}"] = decode_column(column, self.length)
            decoded = (dtype, steps.tobytes())
            if records is None:
                self._records = decoded
            return decoded
        return records

    def column_bytes(self) -> List:
        """The stored bytes of each column, in order (without building the columns)."""
        columns = self._columns
        if columns is None:
            return [self._column_data]
        return [column.data for column in columns]

    def replace_column_bytes(self, blobs: Sequence) -> None:
        """Swaps each column's stored bytes for `blobs[i]`, a buffer holding the same bytes
        elsewhere (a disk-backed store's copy; checksums and sizes stay as they are), and stops
        keeping decoded steps (`step_records`), whose copy would grow anonymous memory with every
        chunk sampled. Callers pass exactly `column_bytes()`'s bytes, copied."""
        columns = self._columns
        if columns is None:
            (self._column_data,) = blobs
        else:
            self._columns = tuple(column._replace(data=blob) for column, blob in zip(columns, blobs))
        self._records = _RECORDS_NOT_KEPT

    @property
    def raw_nbytes(self) -> int:
        """Bytes of the decoded columns (`nbytes` before compression)."""
        return sum(c.raw_size(self.length) for c in self.columns)

    def validate(self) -> None:
        """Checks that every column decodes to its declared dtype and shape: a dtype replay
        stores (`specs.parse_dtype`), a decodable shape, bytes matching their checksum and the
        declared size, and for compressed columns a valid lz4 block of exactly that size.

        Compressed columns are decompressed once into a scratch buffer (outside the GIL): lz4
        decodes at several GB/s in C, far faster than walking the block's sequences in Python,
        and only a full decode proves that the data is sampleable. Most of the cost is the
        fresh memory of the scratch buffer, as for any decode of the column
        (`python tools/bench_replay.py --mode validate` measures it).

        Raises:
          DataLossError: a column's bytes do not match their checksum or declared size.
          InvalidArgumentError: no steps or no columns; an unsupported dtype or shape; delta
            encoding on a non-integer column; a compressed column that is not valid lz4.
        """
        if self.length <= 0 or not self.columns:
            raise errors.InvalidArgumentError(
                f"chunk {self.key}: needs at least one step and one column (length {self.length}, "
                f"{len(self.columns)} columns)"
            )
        for i, column in enumerate(self.columns):
            validate_column(column, self.length, f"chunk {self.key} column {i}")

    def __repr__(self) -> str:
        return (f"Chunk(key={self.key}, episode_id={self.episode_id}, start_index={self.start_index}, "
                f"length={self.length}, columns={len(self.columns)}, nbytes={self.nbytes})")


def built_chunks(keys: Sequence[int], columns: Sequence[Tuple[ColumnData, ...]], lengths: Sequence[int],
                 episode_ids: Sequence[int], start_indices: Sequence[int],
                 nbytes: Sequence[int]) -> List[Chunk]:
    """`Chunk(keys[i], columns[i], lengths[i], episode_ids[i], start_indices[i], nbytes[i])` for
    every i, for decoders whose fields are ints and tuples already (protobuf's repeated fields):
    the constructor's conversions and call cost about as much as the rest of the server's
    decoding of a small chunk, and a server decodes one per item it is sent."""
    new = Chunk.__new__
    out = []
    append = out.append
    for key, chunk_columns, length, episode_id, start_index, size in zip(keys, columns, lengths, episode_ids,
                                                                         start_indices, nbytes):
        chunk = new(Chunk)
        chunk.key = key
        chunk._columns = chunk_columns  # noqa: SLF001 - this module's class
        chunk.length = length
        chunk.episode_id = episode_id
        chunk.start_index = start_index
        chunk._records = None  # noqa: SLF001
        chunk.nbytes = size
        append(chunk)
    return out


def one_column_chunks(keys: Sequence[int], dtype: str, shape: Tuple[int, ...], blobs: Sequence[bytes],
                      crcs: Sequence[int], lengths: Sequence[int], episode_ids: Sequence[int],
                      start_indices: Sequence[int]) -> List[Chunk]:
    """Chunks of one uncompressed, not delta-encoded column each, of `dtype` and step `shape`
    (the other arguments as for `built_chunks`). Each is one object until its `columns`
    are first read: the server makes one such chunk per step it is sent (see
    `items.span_items` for what each object costs it)."""
    new = Chunk.__new__
    out = []
    append = out.append
    for key, blob, crc, length, episode_id, start_index in zip(keys, blobs, crcs, lengths, episode_ids,
                                                              start_indices):
        chunk = new(Chunk)
        chunk.key = key
        chunk._columns = None  # noqa: SLF001 - this module's class
        chunk._column_dtype = dtype  # noqa: SLF001
        chunk._column_shape = shape  # noqa: SLF001
        chunk._column_data = blob  # noqa: SLF001
        chunk._column_crc = crc  # noqa: SLF001
        chunk.length = length
        chunk.episode_id = episode_id
        chunk.start_index = start_index
        chunk._records = None  # noqa: SLF001
        chunk.nbytes = len(blob)
        append(chunk)
    return out


def one_column_layout(chunks: Sequence[Chunk]) -> Optional[Tuple[str, Tuple[int, ...], List[bytes], List[int]]]:
    """(dtype, step shape, data, crc32s) of `chunks` when each holds one uncompressed, not
    delta-encoded column and all have the same dtype and step shape (the chunks of
    `one_column_chunks`, read without building their columns), else None. The server's
    sample responses encode such chunks from these lists (`codec.encode_span_sample`)."""
    dtype = shape = None
    blobs: List[bytes] = []
    crcs: List[int] = []
    for chunk in chunks:
        columns = chunk._columns  # noqa: SLF001 - this module's class
        if columns is None:
            column_dtype, column_shape = chunk._column_dtype, chunk._column_shape  # noqa: SLF001
            blob, crc = chunk._column_data, chunk._column_crc  # noqa: SLF001
        elif len(columns) == 1 and not columns[0].compressed and not columns[0].delta_encoded:
            column_dtype, column_shape, blob, _, _, crc = columns[0]
        else:
            return None
        if column_dtype != dtype or column_shape != shape:
            if dtype is not None:
                return None
            dtype, shape = column_dtype, column_shape
        blobs.append(blob)
        crcs.append(crc)
    return dtype, shape, blobs, crcs
