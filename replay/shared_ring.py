"""Shared-memory rings between a client and a server on the same host: a sample stream's
responses and a writer's chunks travel through one instead of through gRPC.

Sample streams: `replay.client` creates a ring per stream and names it in its first
`SampleRequest`; the server's SampleStream, `replay.sample_service`, opens it and writes
responses' column bytes into it. Over gRPC a response's bytes are copied six times between the
server's chunks and the reader's arrays (the server's serialization and gRPC's copy of it, the
kernel's two, gRPC's two on receipt); through the ring twice: the server writes them into it,
the reader copies them out into its arrays. Only the small protobuf message still travels over
gRPC, with `RingData` saying where its columns are.

Writers: `replay.insert_stream` creates a ring per InsertStream whose chunks are large (the
writer places its messages' chunk bytes), names it in a message, and places bytes there once
the server's InsertStream (`replay.insert_service`) answered that it opened it; the server
copies each message's bytes out before it answers the message, so the message's ack gives
their room back. Reverb cannot do either: its streams are gRPC only.

Protocol. The client creates a file in /dev/shm (mode 0600, its pages reserved up front so that
writing to it can never fault) holding a random nonce at its start, and sends its name and the
nonce. A server that opens a file of that name holding the same nonce is on the same host, and
uses it; any other server (another host, another /dev/shm) finds no such file or another nonce,
and the bytes travel inline as always. The writing side allocates each message's columns in the
ring in order (each 64-byte aligned, one message's columns contiguous, wrapping to the start
when they do not fit before the end) and never writes over bytes the reading side has not given
back: a message that finds no room goes inline, so a slow reader costs copies, never
correctness. For sample streams the server tells the client, in the response, the total to give
back once it has read them (`RingData.release`), and the client sends that total back
(`SampleRequest.ring_released`) once it copied them out; for writers an ack gives back every
placement up to its message. The client unlinks the file as soon as the server has it mapped
(or never will), and in any case when the stream ends.

Linux only (a /dev/shm tmpfs); elsewhere `ClientRing.create` returns None and streams stay on gRPC.
"""
from __future__ import annotations

import hmac
import logging
import mmap
import os
import re
import secrets
import stat
from typing import List, Optional, Sequence, Tuple

from replay import errors

log = logging.getLogger(__name__)

SHM_DIR = "/dev/shm"
DEFAULT_SHARED_MEMORY = True
"""Whether a `ReplayDataset`'s streams offer their server a ring unless told otherwise."""
DEFAULT_RING_BYTES = 64 * 1024 * 1024
"""The size of a ring `ClientRing.create` makes unless told: room for several of the server's
largest responses (16 MB) between the server's writing and the reader's copying out."""
_MIN_STREAM_RING_BYTES = 8 * 1024 * 1024
_MAX_STREAM_RING_BYTES = 96 * 1024 * 1024
_MIN_RING_BUDGET_BYTES = 256 * 1024
_NAME_PREFIX = "replay-ring-"
_NAME_PATTERN = re.compile(r"^replay-ring-[0-9a-f]{32}$")
_NONCE_BYTES = 16
_HEADER_BYTES = 64  # the nonce, then data from the first aligned offset
_ALIGNMENT = 64
_MIN_RING_BYTES = 1024 * 1024


def _aligned(value: int) -> int:
    return (value + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT


def stream_ring_bytes(max_in_flight: int, item_bytes: Optional[int]) -> int:
    """The ring size of a stream that keeps `max_in_flight` items of `item_bytes` (None: not
    known) requested: one and a half budgets' worth (the reader grants credit as responses
    arrive, before it decoded them), within 8 and 96 MB; 0 (no ring) when the items' size is
    not known (they are decoded one by one, copies either way) or the budget is under 256 kB
    (readers that open a stream per few samples would pay more for the ring than it saves).
    Its pages are reserved as long as the stream is open."""
    if not item_bytes or max_in_flight * item_bytes < _MIN_RING_BUDGET_BYTES:
        return 0
    return _aligned(min(_MAX_STREAM_RING_BYTES,
                        max(_MIN_STREAM_RING_BYTES, max_in_flight * item_bytes * 3 // 2)))


class _MappedRing:
    """A mapped ring, either side's: the side that writes places columns into free space
    (`place`) and takes room back as the other side gives it back (`release`); the side that
    reads takes views of placed columns (`views`)."""

    def __init__(self, memory: mmap.mmap):
        self._memory = memory
        self._view = memoryview(memory)
        self._size = len(memory)
        self._head = 0  # bytes handed out so far, padding at the ring's end included
        self._released = 0

    def views(self, offsets: Sequence[int], lengths: Sequence[int], what: str = "a sample response"
              ) -> List[memoryview]:
        """Views of the columns of one message (`what`, for errors) placed in the ring.

        Raises:
          DataLossError: a column lies outside the ring's data area (a broken peer).
        """
        size = len(self._view)
        if len(offsets) != len(lengths):
            raise errors.DataLossError(
                f"{what}'s ring data names {len(offsets)} offsets but {len(lengths)} lengths")
        out = []
        for offset, length in zip(offsets, lengths):
            if offset < _HEADER_BYTES or length < 0 or offset + length > size:
                raise errors.DataLossError(
                    f"{what}'s column at ring offset {offset} of {length} bytes lies outside "
                    f"the ring's {size} bytes")
            out.append(self._view[offset:offset + length])
        return out

    def release(self, total: int) -> None:
        """The reader is done with every placement up to `total` (`place`'s third value); a
        total out of order or beyond what was handed out is ignored."""
        if self._released < total <= self._head:
            self._released = total

    def place(self, columns: Sequence) -> Optional[Tuple[List[int], List[int], int]]:
        """Writes `columns` (bytes-like) into free space of the ring: (offsets, lengths, the
        total to release once the reader is done with them), or None (nothing written) when
        they do not fit now. Columns are 64-byte aligned and contiguous."""
        lengths = [len(c) for c in columns]
        span = 0
        for length in lengths:
            span = _aligned(span) + length
        data_size = (self._size - _HEADER_BYTES) // _ALIGNMENT * _ALIGNMENT
        if span == 0 or span > data_size // 2:
            return None
        start = self._head % data_size
        skip = 0 if start + span <= data_size else data_size - start
        if self._head + skip + span - self._released > data_size:
            return None
        self._head += skip
        base = _HEADER_BYTES + (0 if skip else start)
        view = self._view
        offsets = []
        position = 0
        for column, length in zip(columns, lengths):
            position = _aligned(position)
            offset = base + position
            view[offset:offset + length] = column
            offsets.append(offset)
            position += length
        self._head += _aligned(span)
        return offsets, lengths, self._head

    def close(self) -> None:
        """Unmaps the ring once the last view of it is gone."""
        try:
            self._view.release()
            self._memory.close()
        except BufferError:
            pass  # a view is still alive somewhere; the mapping goes with the last reference


class ClientRing(_MappedRing):
    """The client's side of a ring: creates the file and maps it. A sample stream's reader
    takes views of the server's responses in it; a writer places its messages' chunk bytes in
    it. `close()` unmaps and unlinks it once no view is used any more (callers copy out of the
    views before they release a response)."""

    def __init__(self, path: str, nonce: bytes, memory: mmap.mmap):
        super().__init__(memory)
        self.path = path
        self.name = os.path.basename(path)
        self.nonce = nonce

    @classmethod
    def create(cls, size: int = DEFAULT_RING_BYTES) -> Optional["ClientRing"]:
        """A new ring of `size` bytes, or None where shared memory is not available (no
        /dev/shm, or not enough room in it): the stream then stays on gRPC."""
        if not os.path.isdir(SHM_DIR):
            return None
        size = _aligned(max(_MIN_RING_BYTES, int(size)))
        path = os.path.join(SHM_DIR, _NAME_PREFIX + secrets.token_hex(16))
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            log.debug("replay: no shared-memory ring (%s)", e)
            return None
        try:
            # Reserved now, so that no write to the mapping can fail later (a tmpfs that runs
            # full faults writes to pages not yet allocated with SIGBUS).
            os.posix_fallocate(fd, 0, size)
            memory = mmap.mmap(fd, size)
        except (OSError, ValueError) as e:
            os.close(fd)
            _unlink(path)
            log.debug("replay: no shared-memory ring of %d bytes (%s)", size, e)
            return None
        os.close(fd)
        nonce = secrets.token_bytes(_NONCE_BYTES)
        memory[:_NONCE_BYTES] = nonce
        return cls(path, nonce, memory)

    def unlink(self) -> None:
        """Removes the file's name (the mappings stay valid); idempotent."""
        _unlink(self.path)

    def close(self) -> None:
        """Unlinks the file and unmaps the ring once the last view of it is gone."""
        self.unlink()
        super().close()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class ServerRing(_MappedRing):
    """The server's side of a client's ring: a sample stream places responses' columns in it
    and takes back what the client gave back; an insert stream takes views of the writer's
    chunk bytes."""

    @classmethod
    def open(cls, name: str, nonce: bytes) -> Optional["ServerRing"]:
        """The client's ring `name`, or None when this process cannot use it: a name that is
        not a ring's, no such file here (the client is on another host), another nonce, or a
        file too small. Never raises: the stream then sends its bytes inline."""
        if not _NAME_PATTERN.match(name or "") or len(nonce) != _NONCE_BYTES:
            return None
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or status.st_size < _MIN_RING_BYTES:
                return None
            memory = mmap.mmap(fd, status.st_size)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        if not hmac.compare_digest(bytes(memory[:_NONCE_BYTES]), nonce):
            memory.close()
            return None
        return cls(memory)
