"""The chunk store: one place to find every live chunk by key, without keeping any alive.

Items (and writers' keep-alive lists) hold strong references to their `Chunk`s; the store holds
only weak references. A chunk therefore lives exactly while something references it, and its
memory is released when the last item referencing it is deleted or evicted from every table.
The replay server inserts incoming chunks here and resolves the chunk keys of incoming items
through `get`. Thread-safe.
"""
from __future__ import annotations

import threading
import weakref
from typing import Iterable, List

from replay import errors
from replay.chunks import Chunk


# The store sweeps out the entries of dead chunks once it holds this many more entries than
# live chunks at its last sweep (and at least _MIN_SWEEP_ENTRIES), so a sweep costs O(1) per insert.
_SWEEP_FACTOR = 2
_MIN_SWEEP_ENTRIES = 4096


class ChunkStore:
    """Key -> live `Chunk`, by weak reference.

    Entries are plain weak references without callbacks (a `WeakValueDictionary` runs Python code
    to create every entry and again when its chunk dies, which cost the server microseconds per
    chunk); the entries of dead chunks are dropped in amortised sweeps.
    """

    def __init__(self):
        self._chunks = {}  # key -> weakref.ref(chunk)
        self._lock = threading.Lock()
        self._sweep_at = _MIN_SWEEP_ENTRIES

    def insert(self, chunks: Iterable[Chunk]) -> List[Chunk]:
        """Stores chunks and returns the stored objects, in order.

        When a live chunk with the same key is already stored, that object is returned instead of
        the new one (the data is not stored twice). The store keeps only weak references: the
        caller must hold the returned chunks (normally through items) to keep them alive.
        """
        if type(chunks) is not list:
            chunks = list(chunks)  # (a list is returned as it is when every chunk is new)
        ref = weakref.ref
        new = {chunk.key: ref(chunk) for chunk in chunks}
        with self._lock:
            table = self._chunks
            if len(new) == len(chunks) and table.keys().isdisjoint(new):
                # a writer's new chunks (distinct keys, none stored): one dict update
                table.update(new)
                if len(table) >= self._sweep_at:
                    self._sweep_locked()
                return chunks
            stored = []
            for chunk in chunks:
                key = chunk.key
                entry = table.get(key)
                existing = None if entry is None else entry()
                if existing is None:
                    table[key] = ref(chunk)
                    existing = chunk
                stored.append(existing)
            if len(table) >= self._sweep_at:
                self._sweep_locked()
        return stored

    def note_read(self, nbytes: int) -> None:
        """Says that the server read `nbytes` of chunk data; nothing for chunks in memory (the
        disk-backed store bounds its mapped pages with it: `replay.disk_chunk_store`)."""

    def close(self) -> None:
        """Stops whatever the store runs besides its callers (nothing for chunks in memory; the
        disk-backed store's memory bound has a thread). The chunks stay readable. Idempotent."""

    def _sweep_locked(self) -> None:
        live = {key: entry for key, entry in self._chunks.items() if entry() is not None}
        self._chunks = live
        self._sweep_at = max(_MIN_SWEEP_ENTRIES, _SWEEP_FACTOR * len(live))

    def get(self, keys: Iterable[int]) -> List[Chunk]:
        """The live chunks with these keys, in order.

        Raises:
          NotFoundError: some keys name no live chunk; the message lists them.
        """
        found, missing = [], []
        with self._lock:
            table = self._chunks
            for key in keys:
                entry = table.get(key)
                chunk = None if entry is None else entry()
                if chunk is None:
                    missing.append(key)
                else:
                    found.append(chunk)
        if missing:
            raise errors.NotFoundError(
                f"chunk(s) {missing[:10]}{' ...' if len(missing) > 10 else ''} are not in the chunk store: "
                "they were never sent, or every item referencing them is gone; send the chunks again "
                "before the items that use them")
        return found

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for entry in self._chunks.values() if entry() is not None)

    def __contains__(self, key) -> bool:
        with self._lock:
            entry = self._chunks.get(key)
            return entry is not None and entry() is not None

    def keys(self) -> List[int]:
        """Keys of the live chunks (a snapshot)."""
        with self._lock:
            return [key for key, entry in self._chunks.items() if entry() is not None]
