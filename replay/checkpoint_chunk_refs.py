"""A checkpoint's chunk data as links to the chunk files, not copies (format version 3).

Part of the replay checkpoints (`replay.checkpoint`): a server with a chunk directory keeps its
chunks' column bytes in segment files (`replay.disk_chunk_store`, `replay.segment_files`). Its
checkpoints give each segment file that holds referenced bytes a name in the checkpoint
directory (a hard link: no chunk byte is written again) and record where every column's bytes
are; a restore maps those files read-only and lets the chunks' columns be views into them (or,
for a server without a chunk directory, reads the bytes into memory). `replay.checkpoint_files`
holds the rest of the format (manifest, records, DONE).

Files of such a checkpoint, besides manifest.json, items.bin and DONE:

    chunks.bin          records of replay.ChunkBatch as in version 2, without the column bytes
                        (keys, lengths, dtypes, shapes, flags and each column's CRC32)
    chunk_refs.bin      per column of chunks.bin, in order: three little-endian uint64, the
                        index into the manifest's chunk_files, the byte offset, the length
    chunk-file-NNNNNN   the chunk files: hard links to segment files, or (for bytes no file can
                        give: chunks kept in memory, a file whose names were all pruned) a file
                        written with those bytes

The manifest's chunk_files lists {"name", "min_size"} (the end of the last byte referenced).
Bytes a checkpoint references never change: segments are only appended to (a linked segment
file goes on growing while its server runs, past min_size) and a restored checkpoint's files
are only read. chunks.bin and chunk_refs.bin are covered by SHA-256 in the manifest; the chunk
files by the size check and by each column's CRC32, which the restore checks for every column
(with the lz4 decode `Chunk.validate` runs), as a copying checkpoint's restore does: it reads
every byte, from the page cache where the server ran on this machine.
"""
from __future__ import annotations

import hashlib
import logging
import mmap
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from replay import codec, errors, segment_files
from replay.checkpoint_files import (CHUNK_FILE_PREFIX, CHUNK_REFS, MANIFEST, read_as_corrupt, read_records,
                                     write_chunk_records, write_item_records)
from replay.chunks import Chunk, validate_column
from replay.proto import replay_pb2

log = logging.getLogger(__name__)

_REF = struct.Struct("<QQQ")  # file index, offset, length
# A restore checks every byte through the files' mappings; it drops the pages it read from the
# process every this many bytes (the page cache keeps them), so that a restore of a table many
# times the memory, or under a chunk cache bound, does not map all of it at once.
_RESTORE_MAPPED_BYTES = 16 << 20
_COPIED = object()  # a file of `segment_files` whose bytes are copied (it lost its names)


def write_referencing_data_files(directory: str, chunks: Sequence[Chunk],
                                 snapshots: Sequence) -> Tuple[Dict[str, dict], List[dict]]:
    """Writes chunks.bin (without column bytes), items.bin and chunk_refs.bin into `directory`
    and links the chunk files there (a written one for bytes no file gives); returns the
    manifest's "files" and "chunk_files" entries. The linked files' data is flushed to disk.

    Raises:
      segment_files.LinkUnavailable: the chunk files cannot be linked into `directory` (created without
        O_TMPFILE, another filesystem, no hard links there); nothing was copied, and files
        already linked into `directory` are left there for the caller to remove.
      OSError: a file cannot be written or flushed.
    """
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        chunk_files: List[dict] = []
        file_index: Dict[int, object] = {}  # id(MappedFile) -> index into chunk_files, or _COPIED
        linked: List[segment_files.MappedFile] = []
        copied: List = []  # blobs written into the copied file, in order
        copied_bytes = 0
        copied_index: Optional[int] = None
        refs = bytearray()
        for chunk in chunks:
            for blob in chunk.column_bytes():
                size = len(blob)
                if size == 0:
                    refs += _REF.pack(0, 0, 0)
                    continue
                found = segment_files.locate(blob)
                index = None
                if found is not None:
                    record, offset = found
                    index = file_index.get(id(record))
                    if index is None:
                        name = f"{CHUNK_FILE_PREFIX}{len(chunk_files):06d}"
                        try:
                            record.link_into(dir_fd, name)
                        except segment_files.FileUnlinked:
                            index = file_index[id(record)] = _COPIED
                        else:
                            index = file_index[id(record)] = len(chunk_files)
                            chunk_files.append({"name": name, "min_size": 0})
                            linked.append(record)
                if index is None or index is _COPIED:
                    if copied_index is None:
                        copied_index = len(chunk_files)
                        chunk_files.append({"name": f"{CHUNK_FILE_PREFIX}{len(chunk_files):06d}", "min_size": 0})
                    index, offset = copied_index, copied_bytes
                    copied.append(blob)
                    copied_bytes += size
                entry = chunk_files[index]
                entry["min_size"] = max(entry["min_size"], offset + size)
                refs += _REF.pack(index, offset, size)
        if copied:
            log.info("checkpoint %s: %d bytes of chunk data are in no chunk file that can be linked (kept in "
                     "memory, or in a file whose checkpoints were pruned): copied", directory, copied_bytes)
            _write_file(os.path.join(directory, chunk_files[copied_index]["name"]), copied)
        for record in linked:
            record.sync()
    finally:
        os.close(dir_fd)
    files = {"chunks.bin": write_chunk_records(os.path.join(directory, "chunks.bin"), chunks,
                                               with_column_data=False),
             "items.bin": write_item_records(os.path.join(directory, "items.bin"), snapshots),
             CHUNK_REFS: _write_refs(os.path.join(directory, CHUNK_REFS), bytes(refs))}
    return files, chunk_files


def _write_file(path: str, blobs: Sequence) -> None:
    with open(path, "wb") as f:
        for blob in blobs:
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())


def _write_refs(path: str, data: bytes) -> dict:
    _write_file(path, [data])
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def load_referenced_chunks(path: str, manifest: dict, chunk_records: bytes, refs: bytes, clock,
                           map_files: bool) -> Dict[int, Chunk]:
    """The chunks of the referencing checkpoint at `path`: `chunk_records` and `refs` are its
    chunks.bin and chunk_refs.bin (verified against the manifest), `clock` the restore's
    deadline and progress (as `replay.checkpoint_files.read_data_file`'s). With `map_files`
    the columns' bytes are views into the chunk files, mapped read-only (for a server with a
    chunk directory: `DiskChunkStore.adopt_mapped`); without, copies in memory. Every column's
    CRC32, size and (compressed columns) lz4 block is checked.

    Raises:
      CorruptCheckpointError: a chunk file is missing, unreadable or shorter than its
        min_size, a column's bytes do not match its CRC32 or declared size, or chunks.bin,
        chunk_refs.bin and the manifest disagree (the message names the file and the field).
      DeadlineExceededError: the restore's timeout passed.
    """
    if len(refs) % _REF.size:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {CHUNK_REFS} holds {len(refs)} bytes, not a whole number of "
            f"{_REF.size}-byte entries (truncated); the checkpoint is corrupt")
    table = np.frombuffer(refs, "<u8").reshape(-1, 3)
    names = [entry["name"] for entry in manifest["chunk_files"]]
    views = []  # per chunk file: a memoryview of all of it
    for i, (name, entry) in enumerate(zip(names, manifest["chunk_files"])):
        clock.check(path, f"opening the chunk files ({i} of {len(names)} opened)")
        try:
            mapping = segment_files.open_mapped(os.path.join(path, name))
        except (OSError, ValueError) as e:
            raise errors.CorruptCheckpointError(
                f"checkpoint {path}: cannot read {name} (field chunk_files[{i}] of {MANIFEST}): {e}; the "
                "checkpoint is corrupt") from None
        if len(mapping) < entry["min_size"]:
            raise errors.CorruptCheckpointError(
                f"checkpoint {path}: {name} holds {len(mapping)} bytes but field chunk_files[{i}].min_size of "
                f"{MANIFEST} says {entry['min_size']} (truncated); the checkpoint is corrupt")
        views.append(memoryview(mapping))
    num_chunks = manifest["num_chunks"]
    chunks: Dict[int, Chunk] = {}
    cursor = 0  # the next entry of chunk_refs.bin
    touched, read_since_drop = set(), 0  # files read from since the last drop of their pages
    where = f"checkpoint {path}: chunks.bin"

    def before_chunk_record():
        clock.check(path, f"loading chunks ({len(chunks)} of {num_chunks} loaded and checked)")
        clock.progress(path, f"{len(chunks)} of {num_chunks} chunks loaded and checked")

    with read_as_corrupt(where):
        for batch in read_records(chunk_records, where, replay_pb2.ChunkBatch, before_chunk_record):
            count = sum(batch.num_columns)
            if cursor + count > len(table):
                raise errors.CorruptCheckpointError(
                    f"checkpoint {path}: {CHUNK_REFS} holds {len(table)} columns but chunks.bin has more")
            places = table[cursor:cursor + count].tolist()
            blobs = [_column_bytes(path, names, views, manifest, cursor + j, place, map_files)
                     for j, place in enumerate(places)]
            column = 0
            for chunk in codec.decode_chunks(batch, validate=False, column_data=blobs):
                if chunk.key in chunks:
                    raise errors.InvalidArgumentError(f"chunk {chunk.key} appears twice")
                if chunk.length <= 0:
                    raise errors.InvalidArgumentError(f"chunk {chunk.key} has no steps")
                for i, data in enumerate(chunk.columns):
                    file_index, offset, length = places[column]
                    if length:
                        touched.add(file_index)
                        read_since_drop += length
                    try:
                        validate_column(data, chunk.length, f"chunk {chunk.key} column {i}")
                    except errors.ReplayError as e:
                        name = names[file_index] if length else CHUNK_REFS
                        raise errors.CorruptCheckpointError(
                            f"checkpoint {path}: {name} at byte {offset} ({length} bytes, entry "
                            f"{cursor + column} of {CHUNK_REFS}): {e}; the checkpoint is corrupt") from None
                    column += 1
                if map_files:
                    # the bytes live in a file: keep no decoded copy of them (as the disk store's)
                    chunk.replace_column_bytes(chunk.column_bytes())
                chunks[chunk.key] = chunk
            cursor += count
            if read_since_drop >= _RESTORE_MAPPED_BYTES:
                _drop_pages(views, touched)
                touched, read_since_drop = set(), 0
    _drop_pages(views, touched)
    if cursor != len(table):
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {CHUNK_REFS} holds {len(table)} columns but chunks.bin {cursor}; the "
            "checkpoint is corrupt")
    return chunks


def _drop_pages(views: List[memoryview], indexes) -> None:
    """Drops the pages of these files' mappings from the process (they stay in the page cache;
    a later read maps them again)."""
    for index in indexes:
        try:
            views[index].obj.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # (not expected: a mapping of this restore, still open)
            pass


def _column_bytes(path: str, names: List[str], views: List[memoryview], manifest: dict, entry: int,
                  place: list, map_files: bool):
    file_index, offset, length = place
    if length == 0:
        return b""
    if file_index >= len(views):
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {CHUNK_REFS}: entry {entry} names chunk file {file_index} but field "
            f"chunk_files of {MANIFEST} lists {len(views)}; the checkpoint is corrupt")
    end = offset + length
    if end > manifest["chunk_files"][file_index]["min_size"]:
        raise errors.CorruptCheckpointError(
            f"checkpoint {path}: {CHUNK_REFS}: entry {entry} reaches byte {end} of {names[file_index]}, past "
            f"field chunk_files[{file_index}].min_size of {MANIFEST}; the checkpoint is corrupt")
    view = views[file_index][offset:end]
    return view if map_files else bytes(view)
