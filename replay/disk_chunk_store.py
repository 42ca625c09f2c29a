"""The disk-backed chunk store: the `ChunkStore` of a server started with a chunk directory.

Chunk data (the columns' compressed bytes, the bulk of a table) lives in files on local disk
instead of the server's heap, so a table can hold many times the server's memory. Each chunk the
store takes has its column bytes appended to the current segment, a file of
`DEFAULT_SEGMENT_BYTES` mapped read-only into memory, and then reads them from there: its
columns' `data` become memoryviews into the mapping. The kernel's page cache is the cache of hot
chunks (bounded by the machine's or the cgroup's memory, reclaimed under pressure); the
process's anonymous memory holds only the items, the chunks' metadata and the views.

Each segment file has no name (O_TMPFILE, or a name unlinked as soon as the file is mapped:
`replay.segment_files`), so nothing is left on disk after a crash and a segment's space is freed
exactly when the last chunk referencing it dies (a chunk lives while items or writers'
keep-alive lists reference it, as in memory) and no checkpoint names the file. A segment holding
one long-lived chunk keeps its whole size on disk: with a FIFO remover (the default), chunks die
roughly in the order they were written and segments are freed one after the other. Segments are
only appended to, so bytes a chunk references never change: a checkpoint links the segment
files instead of copying their bytes (`replay.checkpoint_chunk_refs`), and a restore maps the
checkpoint's files; `adopt_mapped` puts those under the memory bound.

With a memory bound (`cache_bytes`; `Server(chunk_cache_bytes=...)`, `replay-server
--chunk-cache-mb`), the store reads the process's mapped file pages (RssFile of
/proc/self/status) from a thread every `_TRIM_POLL_SECONDS` and after every
1/`_CHECK_READ_FRACTION` of the bound that sample responses read (`note_read`); once they grew
by more than half the bound since the last trim, it drops every segment's pages from the process
(madvise MADV_DONTNEED): the chunks' views stay valid, the page cache keeps the pages for the
kernel to reclaim, and the next read of a chunk maps its pages again (a minor fault while the
page cache still holds them). The other half of the bound is for what is read between two
checks, so the chunk bytes resident in the process stay within the bound unless that is more
than half of it (a single sample response mapping that much). A bounded store writes in pieces
of `_BOUNDED_WRITE_BYTES` so that a read maps little more than it reads. Pages of other files
mapped since the last trim count as chunk pages until the next one, which makes the bound
tighter, never looser.

Used by `replay.Server(..., chunk_dir=PATH)` and `replay-server --chunk-dir PATH`.
"""
from __future__ import annotations

import logging
import mmap
import os
import threading
import weakref
from typing import Iterable, Iterator, List, Optional

from replay import errors, segment_files
from replay.chunk_store import ChunkStore
from replay.chunks import Chunk

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024

# Buffers per pwritev call (Linux's IOV_MAX is 1024).
_MAX_BUFFERS_PER_WRITE = 1024
# A store with a memory bound writes at most this many bytes per call: the page cache holds a
# write's bytes in folios sized by the write, and a read through the mapping maps a whole folio,
# so reading a 100 kB chunk written in one 64 MB write mapped 6.5x its bytes, against 1.5x
# (the kernel's 64 kB fault-around) after writes of 64 kB (Linux 6.18, ext4).
_BOUNDED_WRITE_BYTES = 64 * 1024

# How often a store with a memory bound reads the process's mapped file pages (reading
# /proc/self/status costs about 30 us).
_TRIM_POLL_SECONDS = 0.01
# ... and after every 1/_CHECK_READ_FRACTION of the bound that sample responses read: a read
# maps more than the bytes read (at least the kernel's 64 kB fault-around window; 16x the bytes
# of 4 kB chunks read at random places), so the checks must come well before half the bound
# is read.
_CHECK_READ_FRACTION = 64


class _Segment:
    """One nameless file being appended to, and a read-only view of all of it."""

    __slots__ = ("fd", "file", "mapping", "view", "size", "offset")

    def __init__(self, directory: str, size: int):
        mapping, self.file = segment_files.create_segment(directory, size)
        self.fd = self.file.fd  # open while the mapping lives (segment_files)
        self.mapping = mapping
        # Slices of this view keep the mapping (and with it the file's disk space) alive.
        self.view = memoryview(mapping)
        self.size = size
        self.offset = 0


class DiskChunkStore(ChunkStore):
    """A `ChunkStore` whose chunks keep their column bytes in memory-mapped segment files
    under `chunk_dir`. Thread-safe."""

    def __init__(self, chunk_dir, segment_bytes: Optional[int] = None, cache_bytes: Optional[int] = None):
        """`segment_bytes`: the size of each segment file (None: `DEFAULT_SEGMENT_BYTES`); a
        chunk larger than that gets a segment of its own size. `cache_bytes`: the most chunk
        bytes the process keeps mapped in memory (see the module docstring); None: no bound of
        its own (the kernel's page cache decides). Call `close` to stop the bound's thread.

        Raises:
          ChunkDirError: `chunk_dir` is missing, not a directory, or no file can be created,
            sized and mapped in it.
          InvalidArgumentError: `segment_bytes` or `cache_bytes` is not positive, or a bound
            where /proc/self/status cannot be read.
        """
        super().__init__()
        if segment_bytes is None:
            segment_bytes = DEFAULT_SEGMENT_BYTES
        if int(segment_bytes) <= 0:
            raise errors.InvalidArgumentError(f"segment_bytes must be positive, got {segment_bytes}")
        if cache_bytes is not None and int(cache_bytes) <= 0:
            raise errors.InvalidArgumentError(f"cache_bytes must be positive or None, got {cache_bytes}")
        self.cache_bytes = None if cache_bytes is None else int(cache_bytes)
        self.trims = 0  # times the bound dropped the segments' pages
        self._mappings: List[weakref.ref] = []  # every segment's mapping, while chunks use it
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
        self._mappings.append(weakref.ref(self._segment.mapping))
        if not self._segment.file.linkable:
            log.warning("the chunk directory %s cannot create files with O_TMPFILE: checkpoints of this "
                        "server copy the chunk data instead of linking the chunk files", self.chunk_dir)
        self._closed = threading.Event()
        self._bound_lock = threading.Lock()
        self._read_since_check = 0
        if self.cache_bytes is not None:
            try:
                self._baseline_kb = _mapped_file_kb()
            except (OSError, ValueError) as e:
                raise errors.InvalidArgumentError(
                    f"a chunk cache bound reads the process's mapped file pages from /proc/self/status, "
                    f"which cannot be read here ({e}); run without the bound") from None
            threading.Thread(target=_bound_resident_pages, args=(weakref.ref(self), self._closed),
                             name="replay-chunk-cache-bound", daemon=True).start()

    def close(self) -> None:
        """Stops the memory bound's thread (the chunks stay readable). Idempotent."""
        self._closed.set()

    def note_read(self, nbytes: int) -> None:
        """Says that the server read `nbytes` of chunk data (a sample response): with a memory
        bound, every `_CHECK_READ_FRACTION` of the bound read checks the resident pages at once
        instead of at the next poll, so fast sampling cannot outrun the bound's thread."""
        if self.cache_bytes is None:
            return
        self._read_since_check += nbytes
        if self._read_since_check * _CHECK_READ_FRACTION >= self.cache_bytes:
            self._read_since_check = 0
            self.check_resident_pages()

    def check_resident_pages(self) -> None:
        """With a memory bound: drops the segments' pages once the process's mapped file pages
        grew by more than half the bound since the last drop (see the module docstring)."""
        with self._bound_lock:
            try:
                resident_kb = _mapped_file_kb()
            except (OSError, ValueError):  # (read at start, so not expected): checked again later
                return
            if resident_kb - self._baseline_kb <= self.cache_bytes >> 11:  # half, in kB
                return
            self.drop_resident_pages()
            try:
                self._baseline_kb = _mapped_file_kb()  # other files' pages; this store's at about none
            except (OSError, ValueError):
                pass

    def drop_resident_pages(self) -> None:
        """Drops every segment's pages from the process's memory (they stay in the page cache
        until the kernel needs the memory; the next read maps them again)."""
        with self._disk_lock:
            live = [m for m in (ref() for ref in self._mappings) if m is not None]
            self._mappings = [weakref.ref(m) for m in live]
        for mapping in live:
            try:
                mapping.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):  # closed meanwhile: nothing of it is resident
                pass
        self.trims += 1

    def adopt_mapped(self, chunks: Iterable[Chunk]) -> None:
        """Puts the mappings that `chunks`' column bytes are views into (a restored checkpoint's
        files, `replay.checkpoint_chunk_refs`) under the memory bound, as the segments are."""
        with self._disk_lock:
            known = {id(m) for m in (ref() for ref in self._mappings) if m is not None}
            for chunk in chunks:
                for blob in chunk.column_bytes():
                    if _on_disk(blob) and id(blob.obj) not in known:
                        known.add(id(blob.obj))
                        self._mappings.append(weakref.ref(blob.obj))

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
                        self._mappings.append(weakref.ref(segment.mapping))
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
        fd = self._segment.fd
        position = start
        groups = ((blobs[first:first + _MAX_BUFFERS_PER_WRITE]
                   for first in range(0, len(blobs), _MAX_BUFFERS_PER_WRITE))
                  if self.cache_bytes is None else _small_writes(blobs))
        for group in groups:
            expected = sum(map(len, group))
            written = os.pwritev(fd, group, position)
            while written < expected:  # a short write (a signal, a nearly full disk): write the rest
                rest = b"".join(group)[written:]
                more = os.pwrite(fd, rest, position + written)
                if more <= 0:
                    raise OSError(f"wrote {written} of {expected} bytes")
                written += more
            position += expected


def _small_writes(blobs: list) -> Iterator[list]:
    """`blobs` as groups of buffers of at most `_BOUNDED_WRITE_BYTES` each (large blobs split)."""
    group, size = [], 0
    for blob in blobs:
        view = memoryview(blob).cast("B")
        for offset in range(0, len(view), _BOUNDED_WRITE_BYTES):
            piece = view[offset:offset + _BOUNDED_WRITE_BYTES]
            if size + len(piece) > _BOUNDED_WRITE_BYTES or len(group) == _MAX_BUFFERS_PER_WRITE:
                yield group
                group, size = [], 0
            group.append(piece)
            size += len(piece)
    if group:
        yield group


def _mapped_file_kb() -> int:
    """The process's resident pages of mapped files (RssFile), in kB."""
    with open("/proc/self/status", "rb") as f:
        status = f.read()
    start = status.index(b"RssFile:") + 8
    return int(status[start:status.index(b"kB", start)])


def _bound_resident_pages(store_ref: "weakref.ref", closed: threading.Event) -> None:
    """The memory bound's thread: checks the store's resident pages every
    `_TRIM_POLL_SECONDS` (`DiskChunkStore.check_resident_pages`). Ends with the store or its
    `close`."""
    while not closed.wait(_TRIM_POLL_SECONDS):
        store = store_ref()
        if store is None:  # (a server that failed to start, never stopped)
            return
        store.check_resident_pages()
        del store


def _on_disk(blob) -> bool:
    return type(blob) is memoryview and type(blob.obj) is mmap.mmap
