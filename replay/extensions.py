"""Table extensions: code that runs inside a table's atomic operations.

A `replay.table.Table` calls its extensions' hooks while holding its lock, in the same atomic step
as the change they observe: `on_insert` after a new item is added, `on_sample` for every sampled
item, `on_update` after an item's priority changed, `on_delete` after an item was removed (deleted,
evicted or removed at max_times_sampled), `on_reset` after the table was cleared, and
`after_priority_updates` once at the end of every call that updated priorities. Hooks must be
quick and must not call the table's public methods (the lock is held); an extension that changes
priorities uses `Table.assign_priority_in_hook`, which triggers no hooks, so extensions cannot
recurse into each other or themselves.

Shipped: `StatisticsExtension` (items and bytes inserted and sampled, the compression ratio of
the table's chunks) and
`PriorityDiffusionExtension` (spreads a priority update to neighbouring items of one episode).
`extension_from_config(extension.config())` rebuilds an extension (checkpoints, YAML config).
"""
from __future__ import annotations

import bisect
from typing import Dict, List, Tuple

from replay import errors


class TableExtension:
    """Base class: every hook does nothing. An extension instance serves one table."""

    def __init__(self):
        self.table = None

    def on_register(self, table) -> None:
        """Called once by the table that owns the extension.

        Raises:
          InvalidArgumentError: the extension already belongs to another table.
        """
        if self.table is not None and self.table is not table:
            raise errors.InvalidArgumentError(
                f"{type(self).__name__} already belongs to table {self.table.name!r}; create one extension "
                "per table")
        self.table = table

    def on_insert(self, item) -> None:
        pass

    def on_sample(self, item) -> None:
        pass

    def on_update(self, item, old_priority: float) -> None:
        pass

    def on_delete(self, item) -> None:
        pass

    def on_reset(self) -> None:
        pass

    def after_priority_updates(self) -> None:
        pass

    def state(self) -> dict:
        """JSON-able state saved in table checkpoints (after the items are restored, the table
        passes it back to `restore_state`)."""
        return {}

    def restore_state(self, state: dict) -> None:
        pass

    def config(self) -> dict:
        return {"kind": type(self).__name__}

    def info(self) -> dict:
        return self.config()


class StatisticsExtension(TableExtension):
    """Counts items and bytes inserted, sampled and deleted, priority updates, and how well the
    table's chunks compress.

    `bytes_inserted` / `bytes_sampled` are the stored (compressed) bytes of the chunks an item
    references, counted per item: chunks shared by several items count once for each of them.
    The chunk counters count each chunk once, when the first item of this table that references
    it arrives: `chunks_inserted`, `chunk_bytes_inserted` (stored) and `chunk_raw_bytes_inserted`
    (decoded), and per chunk column (leaf i of the steps, in dm-tree's flatten order of the
    signature) `chunk_column_bytes_inserted[i]` / `chunk_column_raw_bytes_inserted[i]`;
    `info()` adds `compression_ratio` = raw / stored bytes of those chunks (1.0 before any
    insert), the ratio the table actually achieves, and `chunk_bytes_live` /
    `chunk_raw_bytes_live` of the chunks its present items reference.
    """

    _FIELDS = ("items_inserted", "bytes_inserted", "items_sampled", "bytes_sampled", "items_deleted",
               "priority_updates", "chunks_inserted", "chunk_bytes_inserted",
               "chunk_raw_bytes_inserted")

    def __init__(self):
        super().__init__()
        self._counts = dict.fromkeys(self._FIELDS, 0)
        # chunk key -> [present items referencing it, its stored bytes, its raw bytes]
        self._chunk_refs: Dict[int, List[int]] = {}
        self._live = [0, 0]  # stored, raw bytes of the referenced chunks
        self._column_bytes: List[int] = []
        self._column_raw_bytes: List[int] = []

    def on_insert(self, item):
        counts = self._counts
        counts["items_inserted"] += 1
        counts["bytes_inserted"] += item.nbytes
        refs = self._chunk_refs
        for key, chunk in item.chunks.items():
            ref = refs.get(key)
            if ref is not None:
                ref[0] += 1
                continue
            stored, raw = self._count_columns(chunk)
            refs[key] = [1, stored, raw]
            counts["chunks_inserted"] += 1
            counts["chunk_bytes_inserted"] += stored
            counts["chunk_raw_bytes_inserted"] += raw
            self._live[0] += stored
            self._live[1] += raw

    def _count_columns(self, chunk) -> Tuple[int, int]:
        """Adds a new chunk's columns to the per-column counters; returns its (stored, raw)
        bytes."""
        missing = len(chunk.columns) - len(self._column_bytes)
        if missing > 0:
            self._column_bytes += [0] * missing
            self._column_raw_bytes += [0] * missing
        stored = raw = 0
        for i, column in enumerate(chunk.columns):
            column_stored, column_raw = len(column.data), column.raw_size(chunk.length)
            self._column_bytes[i] += column_stored
            self._column_raw_bytes[i] += column_raw
            stored += column_stored
            raw += column_raw
        return stored, raw

    def on_sample(self, item):
        self._counts["items_sampled"] += 1
        self._counts["bytes_sampled"] += item.nbytes

    def on_update(self, item, old_priority):
        self._counts["priority_updates"] += 1

    def on_delete(self, item):
        self._counts["items_deleted"] += 1
        refs = self._chunk_refs
        for key in item.chunks:
            ref = refs.get(key)
            if ref is None:  # inserted before a checkpoint restore
                continue
            if ref[0] > 1:
                ref[0] -= 1
            else:
                del refs[key]
                self._live[0] -= ref[1]
                self._live[1] -= ref[2]

    def on_reset(self):
        self._counts = dict.fromkeys(self._FIELDS, 0)
        self._chunk_refs.clear()
        self._live = [0, 0]
        self._column_bytes, self._column_raw_bytes = [], []

    def state(self):
        return dict(self._counts)

    def restore_state(self, state):
        self._counts = {k: int(state.get(k, 0)) for k in self._FIELDS}

    def info(self):
        stored = self._counts["chunk_bytes_inserted"]
        ratio = self._counts["chunk_raw_bytes_inserted"] / stored if stored else 1.0
        return {**self.config(), **self._counts, "compression_ratio": ratio,
                "chunk_bytes_live": self._live[0], "chunk_raw_bytes_live": self._live[1],
                "chunk_column_bytes_inserted": list(self._column_bytes),
                "chunk_column_raw_bytes_inserted": list(self._column_raw_bytes)}


def _episode_position(item) -> Tuple[int, int]:
    """(episode_id, first step) of an item: taken from the first slice of its first column."""
    chunk_key, offset, _, _ = item.trajectory[0][1][0]
    chunk = item.chunks[chunk_key]
    return chunk.episode_id, chunk.start_index + offset


class PriorityDiffusionExtension(TableExtension):
    """Spreads priority updates to neighbouring items of the same episode.

    Neighbours: the items whose first chunk has the same episode_id, ordered by their first step
    (ties by key). The item at distance d (1 <= d <= max_distance) before or after an updated item
    gets weight w = diffusion ** d and its priority becomes (1 - w) * own + w * updated, a convex
    combination, so diffused priorities stay finite and non-negative.

    Rules that keep it well defined:
    - Only explicit updates diffuse (mutate_priorities, or insert_or_assign of a present key); the
      diffused changes do not diffuse again (they trigger no hooks), so it cannot recurse.
    - Diffusion runs after all explicit updates of one call, in their order, and never changes an
      item that the same call updated explicitly: explicit values win.
    - Sampling, insertion and deletion do not diffuse.
    """

    def __init__(self, diffusion: float = 0.5, max_distance: int = 1):
        super().__init__()
        try:
            diffusion = float(diffusion)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(
                f"PriorityDiffusionExtension: diffusion must be a number in [0, 1], got {diffusion!r}") from e
        if not 0.0 <= diffusion <= 1.0:
            raise errors.InvalidArgumentError(
                f"PriorityDiffusionExtension: diffusion must be in [0, 1], got {diffusion}")
        if isinstance(max_distance, bool) or not isinstance(max_distance, int) or max_distance < 1:
            raise errors.InvalidArgumentError(
                f"PriorityDiffusionExtension: max_distance must be an integer >= 1, got {max_distance!r}")
        self.diffusion = diffusion
        self.max_distance = max_distance
        self._episodes: Dict[int, List[Tuple[int, int]]] = {}  # episode -> sorted [(step, key)]
        self._position: Dict[int, Tuple[int, int]] = {}  # key -> (episode, step)
        self._pending: List[Tuple[int, float]] = []  # explicit updates of the current call
        self._diffused = 0

    def on_insert(self, item):
        episode, step = _episode_position(item)
        self._position[item.key] = (episode, step)
        bisect.insort(self._episodes.setdefault(episode, []), (step, item.key))

    def on_delete(self, item):
        position = self._position.pop(item.key, None)
        if position is None:
            return
        episode, step = position
        entries = self._episodes[episode]
        index = bisect.bisect_left(entries, (step, item.key))
        del entries[index]
        if not entries:
            del self._episodes[episode]

    def on_reset(self):
        self._episodes.clear()
        self._position.clear()
        self._pending.clear()

    def on_update(self, item, old_priority):
        self._pending.append((item.key, item.priority))

    def after_priority_updates(self):
        pending, self._pending = self._pending, []
        explicit = {key for key, _ in pending}
        for key, priority in pending:
            position = self._position.get(key)
            if position is None:  # deleted later in the same call
                continue
            episode, step = position
            entries = self._episodes[episode]
            index = bisect.bisect_left(entries, (step, key))
            for distance in range(1, self.max_distance + 1):
                weight = self.diffusion ** distance
                for neighbour in (index - distance, index + distance):
                    if 0 <= neighbour < len(entries):
                        neighbour_key = entries[neighbour][1]
                        if neighbour_key in explicit:
                            continue
                        own = self.table.get_priority_in_hook(neighbour_key)
                        self.table.assign_priority_in_hook(neighbour_key, (1.0 - weight) * own + weight * priority)
                        self._diffused += 1

    def neighbours(self, key: int) -> List[int]:
        """Keys of the item's episode in step order (for tests and diagnostics)."""
        episode, _ = self._position[key]
        return [k for _, k in self._episodes[episode]]

    def state(self):
        return {"diffused_updates": self._diffused}

    def restore_state(self, state):
        self._diffused = int(state.get("diffused_updates", 0))

    def config(self):
        return {"kind": "PriorityDiffusionExtension", "diffusion": self.diffusion,
                "max_distance": self.max_distance}

    def info(self):
        return {**self.config(), "diffused_updates": self._diffused, "episodes": len(self._episodes)}


_KINDS = {"StatisticsExtension": StatisticsExtension, "PriorityDiffusionExtension": PriorityDiffusionExtension}


def extension_from_config(config: dict) -> TableExtension:
    """Builds an extension from `TableExtension.config()` output.

    Raises:
      InvalidArgumentError: not a dict, an unknown kind, or bad arguments.
    """
    if not isinstance(config, dict) or "kind" not in config:
        raise errors.InvalidArgumentError(
            f"extension config must be a dict with a 'kind' (one of {sorted(_KINDS)}), got {config!r}")
    cls = _KINDS.get(config["kind"])
    if cls is None:
        raise errors.InvalidArgumentError(
            f"unknown table extension kind {config['kind']!r}; use one of {sorted(_KINDS)}")
    kwargs = {k: v for k, v in config.items() if k != "kind"}
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise errors.InvalidArgumentError(f"extension {config['kind']}: bad arguments {kwargs}: {e}") from e
