"""A table's checkpoint state: one consistent snapshot of its items and counters, and a table
(new or in place) rebuilt from one, with the rule that rebases its rate limiter.

Part of `replay.table.Table` (a mixin; `Table` is the only class built on it). The checkpoint
file format around these snapshots is `replay.checkpoint_files`'s, written and loaded by
`replay.checkpoint`.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

from replay import errors
from replay.items import Item
from replay.selectors import exhaust

if TYPE_CHECKING:
    from replay.table import Table

# How often `load_checkpoint` reports its progress (and so how soon a restore's deadline ends it).
_PROGRESS_EVERY_ITEMS = 4096
_COUNTERS = ("num_inserts", "num_samples", "num_deletes", "num_evictions", "num_updates", "num_unique_samples",
             "num_deleted_episodes")


class TableCheckpoint:
    """`checkpoint`, `from_checkpoint` and `load_checkpoint` of a `replay.table.Table`."""

    def checkpoint(self) -> Tuple[dict, List[Item], dict]:
        """One consistent snapshot: (config, items, counters).

        Items come in insertion order, as copies (sharing trajectories and chunks) so later priority
        and times_sampled changes do not leak into the snapshot. Counters hold the table counters,
        the rate limiter's counts and the extensions' states.
        """
        with self._lock:
            items = [Item(i.key, i.priority, i.trajectory, i.chunks, i.times_sampled, i.inserted_at)
                     for i in self._items.values()]
            limiter = self._rate_limiter
            counters = {
                "num_inserts": self._num_inserts,
                "num_samples": self._num_samples,
                "num_deletes": self._num_deletes,
                "num_evictions": self._num_evictions,
                "num_updates": self._num_updates,
                "num_unique_samples": self._num_unique_samples,
                "num_deleted_episodes": self._num_deleted_episodes,
                "rate_limiter": {"insert_count": limiter.insert_count, "sample_count": limiter.sample_count,
                                 "delete_count": limiter.delete_count},
                "extensions": [extension.state() for extension in self._extensions],
            }
            return self.config(), items, counters

    @classmethod
    def from_checkpoint(cls, config: dict, items: Sequence[Item], counters: dict,
                        progress: Optional[Callable[[int], None]] = None) -> "Table":
        """Rebuilds a table from `checkpoint()` output.

        Items are re-inserted in the given order without consulting the rate limiter, keeping their
        priorities, times_sampled and inserted_at; extensions see them as inserts and then get their
        saved state back; table counters are restored as saved. If there are more items than max_size,
        the remover evicts the excess (counted as evictions).

        Rate-limiter restore rule: the saved cursor is not restored, because a cursor saved while
        samplers were blocked (or whose writers never come back) would keep samplers blocked
        forever. Instead the rate limiter is rebased as if the restored n items had just been
        inserted into an empty table: insert_count = n, delete_count = 0, and sample_count chosen so
        that the cursor inserts * samples_per_insert - samples equals c, where
            c = n * samples_per_insert, raised to min_diff + 1 if n >= min_size_to_sample,
                then capped at max_diff
        (sample_count is a whole number, so the cursor may exceed c by less than 1). Consequences:
        - with n < min_size_to_sample, the table behaves like a fresh table after n inserts;
        - with n >= min_size_to_sample, floor(c - min_diff) samples proceed without any new insert
          (at least 1 whenever max_diff >= min_diff + 1); for SampleToInsertRatio(spi, m, b) that
          is floor(min(n * spi, spi * m + b) - (spi * m - b)), between b and 2b;
        - a Queue or Stack restored with n items can be drained (n samples).
        After that, sampling waits for inserts as usual. The table counters in `info()` are restored
        as saved; only the rate limiter's own counts are rebased.

        `progress` is as `load_checkpoint`'s.

        Raises:
          InvalidArgumentError: a bad config (see `from_config`), or items that are not valid `Item`s
            or repeat a key. What `progress` raises.
        """
        table = cls.from_config(config)
        table.load_checkpoint(items, counters, progress)
        return table

    def load_checkpoint(self, items: Sequence[Item], counters: dict,
                        progress: Optional[Callable[[int], None]] = None) -> None:
        """Replaces this table's items and counters by a checkpoint's (`checkpoint()` output of a
        table with this configuration), in place: writers and samplers using the table go on and
        see the restored items. Same rules as `from_checkpoint` (the rate limiter is rebased);
        blocked inserters and samplers are woken to re-check it. `progress(n)`, when given, is
        called while the items are checked, every _PROGRESS_EVERY_ITEMS with the number checked
        so far; what it raises (a restore's deadline) ends the load with the table unchanged.

        Raises:
          InvalidArgumentError: items that are not valid `Item`s or repeat a key (the table is
            unchanged then). What `progress` raises.
          CancelledError: the table is closed.
        """
        items = list(items)
        keys = set()
        with self._lock:  # the checkpoint's items settle the column modes afresh
            self._forget_column_modes_locked()
        for index, item in enumerate(items):
            if progress is not None and index % _PROGRESS_EVERY_ITEMS == 0:
                progress(index)
            self._validate_item(item)
            if item.key in keys:
                raise errors.InvalidArgumentError(f"table {self.name!r}: checkpoint repeats item key {item.key}")
            keys.add(item.key)
        with self._lock:
            self._check_open()
            self._sampler.clear()
            self._remover.clear()
            self._rate_limiter.reset()
            for extension in self._extensions:
                extension.on_reset()
            self._items = {item.key: item for item in items}
            self._episode_refs = {}
            exhaust(map(self._reference_episodes_locked, items))
            pairs = [(item.key, item.priority) for item in items]
            self._sampler.insert_many(pairs)
            self._remover.insert_many(pairs)
            for item in items:
                for extension in self._extensions:
                    extension.on_insert(item)
            evictions = 0
            while len(self._items) > self.max_size:
                victim, _ = self._remover.sample()
                self._remove_locked(victim)
                evictions += 1
            for name in _COUNTERS:
                setattr(self, "_" + name, int(counters.get(name, 0)))
            self._num_evictions += evictions
            for extension, state in zip(self._extensions, counters.get("extensions", [])):
                extension.restore_state(state)
            self._rebase_rate_limiter_locked()
            self._wake_inserters()
            self._wake_samplers()

    def _rebase_rate_limiter_locked(self) -> None:
        limiter = self._rate_limiter
        n = len(self._items)
        spi = limiter.samples_per_insert
        target = n * spi
        if n >= limiter.min_size_to_sample:
            target = max(target, limiter.min_diff + 1)
        target = min(target, limiter.max_diff)
        if math.isinf(target):  # degenerate bounds: keep the natural cursor
            target = n * spi
        sample_count = math.floor(n * spi - target)
        limiter.restore(n, sample_count, 0)
