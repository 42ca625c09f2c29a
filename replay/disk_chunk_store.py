"""The disk-backed chunk store: the `ChunkStore` of a server started with a chunk directory.

Chunk data (the columns' compressed bytes, the bulk of a table) lives in files on local disk
instead of the server's heap, so a table can hold many times the server's memory. Each chunk the
store takes has its column bytes appended to the current segment, a file of
`DEFAULT_SEGMENT_BYTES` mapped read-only into memory, and then reads them from there: its
columns' `data` become memoryviews into the mapping. The kernel's page cache is the cache of hot
chunks (bounded by the machine's or the cgroup's memory, reclaimed under pressure); the
process's anonymous memory holds only the items, the chunks' metadata and the views.

Each segment file is unlinked as soon as it is mapped, so nothing is left on disk after a crash
and a segment's space is freed exactly when the last chunk referencing it dies (a chunk lives
while items or writers' keep-alive lists reference it, as in memory). A segment holding one
long-lived chunk keeps its whole size on disk: with a FIFO remover (the default), chunks die
roughly in the order they were written and segments are freed one after the other.

Used by `replay.Server(..., chunk_dir=PATH)` and `replay-server --chunk-dir PATH`.
"""
from __future__ import annotations

import mmap
import os
import tempfile
import threading
from typing import Iterable, List, Optional

from replay import errors
from replay.chunk_store import ChunkStore
from replay.chunks import Chunk

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024

# Buffers per pwritev call (Linux's IOV_MAX is 1024).
_MAX_BUFFERS_PER_WRITE = 1024


class _Segment:
    """One unlinked file being appended to, and a read-only view of all of it."""

    __slots__ = ("file", "view", "size", "offset")

    def __init__(self, directory: str, size: int):
        fd, path = tempfile.mkstemp(prefix="chunks-", suffix=".segment", dir=directory)
        try:
            os.unlink(path)  # the open file and its mapping keep the data
            os.ftruncate(fd, size)  # sparse: disk blocks are taken only as chunks are written
            mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        except BaseException:
            os.close(fd)
            raise
        self.file = os.fdopen(fd, "r+b", buffering=0)  # closes fd when the segment is dropped
        # Slices of this view keep the mapping (and with it the file's disk space) alive.
        self.view = memoryview(mapping)
        self.size = size
        self.offset = 0


class DiskChunkStore(ChunkStore):
    """A `ChunkStore` whose chunks keep their column bytes in memory-mapped segment files
    under `chunk_dir`. Thread-safe."""

    def __init__(self, chunk_dir, segment_bytes: Optional[int] = None):
        """`segment_bytes`: the size of each segment file (None: `DEFAULT_SEGMENT_BYTES`); a
        chunk larger than that gets a segment of its own size.

        Raises:
          ChunkDirError: `chunk_dir` is missing, not a directory, or no file can be created,
            sized and mapped in it.
          InvalidArgumentError: `segment_bytes` is not positive.
        """
        super().__init__()
        if segment_bytes is None:
            segment_bytes = DEFAULT_SEGMENT_BYTES
        if int(segment_bytes) <= 0:
            raise errors.InvalidArgumentError(f"segment_bytes must be positive, got {segment_bytes}")
        self.chunk_dir = os.path.abspath(os.fspath(chunk_dir))
        self.segment_bytes = int(segment_bytes)
        if not os.path.isdir(self.chunk_dir):
            what = "does not exist" if not os.path.exists(self.chunk_dir) else "is not a directory"
            raise errors.ChunkDirError(f"the chunk directory {self.chunk_dir} {what}; pass an existing "
                                       "directory on local disk")
        self._disk_lock = threading.Lock()
        try:
            self._segment: Optional[_Segment] = _Segment(self.chunk_dir, self.segment_bytes)
        except (OSError, ValueError) as e:
            raise errors.ChunkDirError(
                f"cannot create a {self.segment_bytes}-byte segment file in the chunk directory "
                f"{self.chunk_dir}: {e}; pass a writable directory on local disk") from None

    def insert(self, chunks: Iterable[Chunk]) -> List[Chunk]:
        """As `ChunkStore.insert`, with the chunks' column bytes moved to disk first.

        Raises:
          ResourceExhaustedError: the chunk directory's disk is full (or another write error);
            nothing is stored.
        """
        if type(chunks) is not list:
            chunks = list(chunks)
        self.store_on_disk(chunks)
        return super().insert(chunks)

    def store_on_disk(self, chunks: Iterable[Chunk]) -> None:
        """Copies the column bytes of `chunks` (those not on disk already) into the segment
        files and points the chunks at the copies; the in-memory bytes are then freed with the
        message they came in. Also for chunks that reach a server otherwise (a restored
        checkpoint's).

        Raises:
          ResourceExhaustedError: as `insert`; the chunks keep their in-memory bytes.
        """
        pending = []  # (chunk, its blobs)
        for chunk in chunks:
            blobs = chunk.column_bytes()
            if blobs and not _on_disk(blobs[0]):
                pending.append((chunk, blobs))
        if not pending:
            return
        with self._disk_lock:
            placed = []  # (chunk, views)
            try:
                group_blobs, group_start = [], None
                for chunk, blobs in pending:
                    size = sum(map(len, blobs))
                    segment = self._segment
                    if segment is None or segment.offset + size > segment.size:
                        self._write(group_blobs, group_start)
                        group_blobs, group_start = [], None
                        self._segment = None  # drop the full one first: its file closes now
                        segment = self._segment = _Segment(self.chunk_dir, max(self.segment_bytes, size))
                    if group_start is None:
                        group_start = segment.offset
                    views = []
                    view, offset = segment.view, segment.offset
                    for blob in blobs:
                        end = offset + len(blob)
                        views.append(view[offset:end])
                        offset = end
                    segment.offset = offset
                    group_blobs.extend(blobs)
                    placed.append((chunk, views))
                self._write(group_blobs, group_start)
            except OSError as e:
                self._segment = None  # its tail may be partly written; start the next write afresh
                raise errors.ResourceExhaustedError(
                    f"cannot write chunk data to the chunk directory {self.chunk_dir}: {e}; free disk space "
                    "there or shrink the tables") from None
            for chunk, views in placed:
                chunk.replace_column_bytes(views)

    def _write(self, blobs: list, start: Optional[int]) -> None:
        """Writes `blobs` back to back into the current segment from offset `start`."""
        if not blobs:
            return
        fd = self._segment.file.fileno()
        position = start
        for first in range(0, len(blobs), _MAX_BUFFERS_PER_WRITE):
            group = blobs[first:first + _MAX_BUFFERS_PER_WRITE]
            expected = sum(map(len, group))
            written = os.pwritev(fd, group, position)
            while written < expected:  # a short write (a signal, a nearly full disk): write the rest
                rest = b"".join(group)[written:]
                more = os.pwrite(fd, rest, position + written)
                if more <= 0:
                    raise OSError(f"wrote {written} of {expected} bytes")
                written += more
            position += expected


def _on_disk(blob) -> bool:
    return type(blob) is memoryview and type(blob.obj) is mmap.mmap
