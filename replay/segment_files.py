"""Files of chunk bytes mapped read-only into the replay server, which a checkpoint can name.

The disk-backed chunk store (`replay.disk_chunk_store`) appends chunks' column bytes to segment
files and reads them back through read-only mappings: a chunk's column bytes are memoryviews
into a mapping. A checkpoint of such chunks (`replay.checkpoint_chunk_refs`) gives each
segment file a name in the checkpoint directory (a hard link: no chunk byte is written again)
instead of copying the bytes, and a restore maps the checkpoint's files the same way. This
module creates and opens those files, keeps each one's descriptor while its mapping lives, and
finds the file and offset of a chunk's column bytes (`locate`).

A new segment file is created with O_TMPFILE: it has no name at all (nothing is left on disk
after a crash) and can still be linked into a directory later (linkat of /proc/self/fd/N). Where
O_TMPFILE is not supported (an old kernel, a filesystem without it) the file is created under a
random name and unlinked at once: it can never be linked, and checkpoints copy the chunk bytes.
A file that had a name and lost all of them (its checkpoints were pruned) cannot be linked again
either (the kernel gives a name to a nameless file only when it was created by O_TMPFILE and
never linked): `MappedFile.link_into` raises `FileUnlinked` and the checkpoint copies its bytes.

Each mapped file holds two descriptors while any chunk uses it (this module's, for linking, and
the one Python's mmap keeps), so a table of N GB in 64 MB segments holds N/32 descriptors.
"""
from __future__ import annotations

import mmap
import os
import tempfile
import threading
import weakref
from typing import Dict, Optional, Tuple

import numpy as np


class LinkUnavailable(Exception):
    """No file of this kind can be linked into the checkpoint directory (created without
    O_TMPFILE, another filesystem, no hard links there, no /proc): the checkpoint copies."""


class FileUnlinked(Exception):
    """This file had a name and lost every one: it cannot be linked again."""


class MappedFile:
    """The descriptor of one mapped file of chunk bytes, kept open while its mapping lives
    (closed when the mapping is collected), and where its mapping starts in memory."""

    __slots__ = ("fd", "linkable", "named", "_start", "__weakref__")

    def __init__(self, fd: int, start: int, linkable: bool, named: bool):
        self.fd = fd
        self.linkable = linkable  # created by O_TMPFILE, or opened by name
        self.named = named  # has had a name (linked, or opened by one)
        self._start = start

    def link_into(self, dir_fd: int, name: str) -> None:
        """Gives the file the name `name` in the directory open as `dir_fd`: a hard link, no
        data written.

        Raises:
          LinkUnavailable: this file, or the directory, cannot take a link (created without
            O_TMPFILE; the directory on another filesystem (EXDEV); a filesystem without hard
            links; /proc not mounted); the message says which.
          FileUnlinked: the file had a name and lost every one (a pruned checkpoint's).
        """
        if not self.linkable:
            raise LinkUnavailable("the chunk directory's files were created without O_TMPFILE, which "
                                  "this kernel or filesystem does not support, so they cannot be linked")
        if self.named and os.fstat(self.fd).st_nlink == 0:
            raise FileUnlinked()
        try:
            # linkat(AT_SYMLINK_FOLLOW): os.link calls plain link(2), which does not follow
            # /proc's link, unless a directory descriptor is given.
            os.link(f"/proc/self/fd/{self.fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
        except OSError as e:
            raise LinkUnavailable(f"linking a chunk file into the checkpoint directory failed: {e}") from None
        self.named = True

    def sync(self) -> None:
        """Flushes the file's data to disk (what a checkpoint references must survive a crash).

        Raises:
          OSError: the flush failed.
        """
        os.fdatasync(self.fd)


_FILES: Dict[int, MappedFile] = {}  # id(mapping) -> its file, while the mapping lives
_FILES_LOCK = threading.Lock()


def _start_address(view: memoryview) -> int:
    return np.frombuffer(view, np.uint8).__array_interface__["data"][0]


def _forget(key: int, fd: int) -> None:
    with _FILES_LOCK:
        _FILES.pop(key, None)
    try:
        os.close(fd)
    except OSError:
        pass


def _register(fd: int, mapping: mmap.mmap, linkable: bool, named: bool) -> MappedFile:
    record = MappedFile(fd, _start_address(memoryview(mapping)), linkable, named)
    key = id(mapping)
    with _FILES_LOCK:
        _FILES[key] = record
    weakref.finalize(mapping, _forget, key, fd)
    return record


def create_segment(directory: str, size: int) -> Tuple[mmap.mmap, MappedFile]:
    """A new nameless file of `size` bytes (sparse) in `directory`, mapped read-only, and its
    record (the descriptor is open for writing: `MappedFile.fd`).

    Raises:
      OSError, ValueError: no file can be created, sized or mapped there.
    """
    linkable = True
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError:  # EOPNOTSUPP, EISDIR (kernels before 3.11), ...: a named file, unlinked
        linkable = False
        fd, path = tempfile.mkstemp(prefix="chunks-", suffix=".segment", dir=directory)
        try:
            os.unlink(path)  # the open file and its mapping keep the data
        except BaseException:
            os.close(fd)
            raise
    try:
        os.ftruncate(fd, size)  # sparse: disk blocks are taken only as chunks are written
        mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except BaseException:
        os.close(fd)
        raise
    return mapping, _register(fd, mapping, linkable, named=False)


def open_mapped(path: str) -> mmap.mmap:
    """The whole file at `path`, mapped read-only (it can be linked into later checkpoints
    while it keeps a name).

    Raises:
      OSError: the file cannot be opened.
      ValueError: it is empty (nothing to map).
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except BaseException:
        os.close(fd)
        raise
    _register(fd, mapping, linkable=True, named=True)
    return mapping


def locate(blob) -> Optional[Tuple[MappedFile, int]]:
    """(file, byte offset) of `blob` when it is a memoryview into a mapping of this module,
    else None (bytes in memory)."""
    if type(blob) is not memoryview:
        return None
    mapping = blob.obj
    if type(mapping) is not mmap.mmap:
        return None
    record = _FILES.get(id(mapping))
    if record is None:
        return None
    return record, _start_address(blob) - record._start  # noqa: SLF001 - this module's class
