"""A table's item storage: adding, evicting, removing and re-prioritizing items under its lock.

Part of `replay.table.Table` (a mixin; `Table` is the only class built on it). Every change of
the stored items goes through here, with the lock held, so the items dict, both selectors, the
rate limiter's counts, the table's counters, the episode references and the extensions' hooks
change together in one atomic step. The public operations that call these live in
`replay.table`; what an item must be to get here, in `replay.table_validation`.
"""
from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import List, Optional, Sequence

from replay.items import Item
from replay.selectors import exhaust

_span_chunk = attrgetter("span_chunk")
_episode_id = attrgetter("episode_id")


def _episode_ids(item: Item) -> list:
    """The episode id of each chunk the item references (one per chunk, as Reverb counts)."""
    chunk = item.span_chunk
    if chunk is not None:
        return [chunk.episode_id]
    return [chunk.episode_id for chunk in item.chunks.values()]


class ItemStorage:
    """The stored items of a `replay.table.Table` and their bookkeeping (lock held).

    Uses the table's `max_size`, `_items`, `_sampler`, `_remover`, `_rate_limiter`,
    `_extensions`, `_episode_refs` and counters.
    """

    def _add_locked(self, item: Item) -> None:
        key = item.key
        self._items[key] = item
        self._sampler.insert(key, item.priority)
        self._remover.insert(key, item.priority)
        self._rate_limiter.insert_count += 1
        self._num_inserts += 1
        self._reference_episodes_locked(item)
        for extension in self._extensions:
            extension.on_insert(item)
        while len(self._items) > self.max_size:
            victim, _ = self._remover.sample()
            self._remove_locked(victim)
            self._num_evictions += 1

    def _add_new_fifo_locked(self, items: Sequence[Item]) -> Optional[int]:
        """`_add_locked` for every item of a batch the rate limiter admits whole, when the table
        has no extensions, its remover is a Fifo and the keys are new (none present, none
        twice), with bulk selector calls: the items that fit are inserted, and each further one evicts the
        oldest item, which (while old items are left) is the next of the `oldest` before the
        batch, so the changes are those of inserting one at a time. None (nothing done) for
        other batches."""
        present, remover = self._items, self._remover
        n = len(items)
        room = self.max_size - len(present)
        evictions = n - room if n > room else 0
        new = {item.key: item for item in items}
        if room < 0 or len(new) != n or evictions > len(present) or not present.keys().isdisjoint(new):
            return None
        pairs = [(item.key, item.priority) for item in items]
        victims = remover.oldest(evictions)
        sampler = self._sampler
        if evictions < n:
            head = pairs[:n - evictions]
            sampler.insert_many(head)
            remover.insert_many(head)
        if evictions < n:
            self._reference_many_locked(items[:n - evictions])
        if evictions:
            tail = pairs[n - evictions:]
            sampler.replace_many(victims, tail)
            remover.replace_many(victims, tail)
            self._replace_episode_refs_locked(items[n - evictions:], list(map(present.pop, victims)))
        present.update(new)
        limiter = self._rate_limiter
        limiter.insert_count += n
        limiter.delete_count += evictions
        self._num_inserts += n
        self._num_evictions += evictions
        return n

    def _reference_many_locked(self, items: Sequence[Item]) -> None:
        """`_reference_episodes_locked` for each item, counted per episode where every item
        holds one chunk."""
        chunks = list(map(_span_chunk, items))
        if None in chunks:
            exhaust(map(self._reference_episodes_locked, items))  # (a C loop)
        else:
            self._reference_chunk_episodes_locked(chunks)

    def _reference_chunk_episodes_locked(self, chunks: List) -> None:
        """One reference to the episode of each chunk (an item's one chunk), per episode."""
        refs = self._episode_refs
        for episode, count in Counter(map(_episode_id, chunks)).items():
            refs[episode] = refs.get(episode, 0) + count

    def _replace_episode_refs_locked(self, added: Sequence[Item], removed: List[Item]) -> None:
        """For each i in turn, references `added[i]`'s episodes, then releases `removed[i]`'s, as
        one insert at a time does (the order decides when an episode counts as deleted). Where
        every item holds one chunk and no episode's count can reach zero within the batch (each
        has more references than the batch releases), the counts change per episode at once:
        the same counts, and no deletion either way."""
        added_chunks = list(map(_span_chunk, added))
        removed_chunks = list(map(_span_chunk, removed))
        if None not in added_chunks and None not in removed_chunks:
            refs = self._episode_refs
            released = Counter(map(_episode_id, removed_chunks))
            if all(refs.get(episode, 0) > count for episode, count in released.items()):
                self._reference_chunk_episodes_locked(added_chunks)
                for episode, count in released.items():
                    refs[episode] -= count
                return
        reference, release = self._reference_episodes_locked, self._release_episodes_locked
        for item, victim in zip(added, removed):
            reference(item)
            release(victim)

    def _reference_episodes_locked(self, item: Item) -> None:
        refs = self._episode_refs
        for episode in _episode_ids(item):
            refs[episode] = refs.get(episode, 0) + 1

    def _release_episodes_locked(self, item: Item) -> None:
        refs = self._episode_refs
        for episode in _episode_ids(item):
            left = refs.get(episode, 0) - 1
            if left > 0:
                refs[episode] = left
            else:
                refs.pop(episode, None)
                self._num_deleted_episodes += 1

    def _remove_locked(self, key: int) -> Item:
        item = self._items.pop(key)
        self._release_episodes_locked(item)
        self._sampler.delete(key)
        self._remover.delete(key)
        self._rate_limiter.delete_count += 1
        for extension in self._extensions:
            extension.on_delete(item)
        return item

    def _update_locked(self, item: Item, priority: float) -> None:
        old = item.priority
        item.priority = priority
        self._sampler.update(item.key, priority)
        self._remover.update(item.key, priority)
        self._num_updates += 1
        for extension in self._extensions:
            extension.on_update(item, old)

    def _finish_updates_locked(self) -> None:
        for extension in self._extensions:
            extension.after_priority_updates()

    # -- hooks' access -----------------------------------------------------------------------------

    def get_priority_in_hook(self, key: int) -> float:
        """The priority of a present item. Only for extension hooks (the lock is held)."""
        return self._items[key].priority

    def assign_priority_in_hook(self, key: int, priority: float) -> None:
        """Sets a present item's priority without calling any extension hook. Only for extension
        hooks (the lock is held); the priority must be valid."""
        item = self._items[key]
        item.priority = priority
        self._sampler.update(key, priority)
        self._remover.update(key, priority)
