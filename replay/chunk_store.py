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


class ChunkStore:
    """Key -> live `Chunk`, by weak reference."""

    def __init__(self):
        self._chunks = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def insert(self, chunks: Iterable[Chunk]) -> List[Chunk]:
        """Stores chunks and returns the stored objects, in order.

        When a live chunk with the same key is already stored, that object is returned instead of
        the new one (the data is not stored twice). The store keeps only weak references: the
        caller must hold the returned chunks (normally through items) to keep them alive.
        """
        stored = []
        with self._lock:
            table = self._chunks
            for chunk in chunks:
                existing = table.get(chunk.key)
                if existing is None:
                    table[chunk.key] = chunk
                    existing = chunk
                stored.append(existing)
        return stored

    def get(self, keys: Iterable[int]) -> List[Chunk]:
        """The live chunks with these keys, in order.

        Raises:
          NotFoundError: some keys name no live chunk; the message lists them.
        """
        found, missing = [], []
        with self._lock:
            for key in keys:
                chunk = self._chunks.get(key)
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
            return len(self._chunks)

    def __contains__(self, key) -> bool:
        with self._lock:
            return self._chunks.get(key) is not None

    def keys(self) -> List[int]:
        """Keys of the live chunks (a snapshot)."""
        with self._lock:
            return list(self._chunks.keys())
