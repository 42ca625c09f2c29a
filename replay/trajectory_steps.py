"""Appending single steps to a trajectory writer: `append` (the per-step fast path and the
general one for partial steps, missing or new columns), the window of kept-alive steps, and the
columns' layout (paths, slots, specs) that steps grow.

Part of the trajectory writer (`replay.trajectory_writer`): `_StepAppending` is one of the
`TrajectoryWriter`'s bases and works on the writer's state, set up and described in
`TrajectoryWriter.__init__`. Chunks a step closes are sent by `replay.trajectory_sending`.
See docs/architecture.md, "Module map".
"""
from __future__ import annotations

import collections
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tree

from replay import errors, specs
from replay.step_structure import _both_strings, _dtype_text, _same_structure, _tree_union
from replay.trajectory_chunks import _INCOMPRESSIBLE_SKIP, _ChunkBuilder
from replay.trajectory_columns import CellRef

# Types dm-tree never treats as nests: a step leaf of one of these needs no structure walk.
_PLAIN_LEAF_TYPES = frozenset((np.ndarray, np.float32, np.float64, np.int64, np.int32, np.bool_,
                               np.uint8, float, int, bool))


class _StepAppending:
    """The trajectory writer's one role of appending steps one at a time (`append`) and of
    keeping its columns' layout and keep-alive window up to date (a base of `TrajectoryWriter`,
    on whose state it works)."""

    def append(self, data: Any, *, partial_step: bool = False) -> Any:
        """Appends a step: a nest of arrays (or values numpy turns into arrays). A None leaf, or
        a leaf some other step has and this one lacks, leaves that column out of this step; a
        leaf at a new path adds a column (earlier steps have no value there). Each column keeps
        the dtype and shape of its first value. With `partial_step`, the step stays open and the
        next calls add columns to it until one without `partial_step` completes it; its cells
        are in `history` (and can be referenced) at once.

        Returns the step's `CellRef`s in the structure of `data` (None where a leaf is None),
        an extension: Reverb's returns None.

        Raises:
          InvalidArgumentError (a ValueError): a column given twice in one step, a dtype or
            shape differing from the column's first, a leaf of Python objects.
          CancelledError (a RuntimeError): the writer is closed. Errors of the stream (see
            `flush`).
        """
        if self._closed:
            self._check_open()
        if self._dense and not partial_step:  # (not _dense while a partial step is open)
            leaves = self._step_leaves(data)
            if leaves is not None:
                return self._append_whole(data, leaves)
        return self._append_general(data, partial_step)

    def _append_whole(self, data, leaves: List[np.ndarray]):
        """The usual step: whole, every leaf an array, every column known (in column order)."""
        specs_ = self._leaf_specs
        for i, (leaf, (shape, dtype)) in enumerate(zip(leaves, specs_)):
            # `is` first: arrays of one builtin dtype share its object, and == costs more
            if leaf.shape != shape or (leaf.dtype is not dtype and leaf.dtype != dtype
                                       and not _both_strings(leaf.dtype, dtype)):
                self._raise_spec_mismatch(i, leaf)
        builder = self._open
        if builder is None:
            builder = self._open = _ChunkBuilder(self._new_key(), self._weak_self, self._episode_id,
                                                 self._episode_step, self._serial)
        offset = len(builder.steps)
        builder.steps.append(leaves)
        if len(leaves) == 1:  # (the zips below cost more than the rest of a one-leaf step)
            shape, dtype = specs_[0]
            refs = [CellRef(builder, offset, 0, shape, dtype, leaves[0])]
            self._history[0].append(refs[0])
        else:
            refs = [CellRef(builder, offset, i, shape, dtype, leaf)
                    for i, ((shape, dtype), leaf) in enumerate(zip(specs_, leaves))]
            for history, ref in zip(self._history, refs):
                history.append(ref)
        self._history_count[0] += 1
        builder.live_steps += 1
        # (_complete_step, inline: this is the per-step path)
        self._episode_step += 1
        self._serial += 1
        window = self._window
        window.append(builder)
        if len(window) > self._keep:
            old = window.popleft()
            if type(old) is tuple:
                self._leave_window(old)
            else:
                old.live_steps -= 1
                if old.live_steps == 0 and old is not self._open:
                    self._maybe_release(old)
        if len(builder.steps) >= (self._chunk_length or self._keep):
            self._finalize(builder)
        return refs[0] if self._one_leaf else self._refs_nest(data, refs)

    def _leave_window(self, builders: Sequence["_ChunkBuilder"]) -> None:
        """A step left the keep-alive window: its builders hold one live step less."""
        for b in builders:
            b.live_steps -= 1
            if b.live_steps == 0 and b is not self._open:
                self._maybe_release(b)

    def _complete_step(self, builder: "_ChunkBuilder", kept: Any) -> None:
        """Counts a completed step whose last row is in `builder`; `kept` is what the window
        holds for it (its builder, or a tuple of builders)."""
        self._episode_step += 1
        self._serial += 1
        window = self._window
        window.append(kept)
        if len(window) > self._keep:
            old = window.popleft()
            self._leave_window(old if type(old) is tuple else (old,))
        # Without a chunk_length, chunks still close every num_keep_alive_refs steps, so steps
        # no item references are dropped instead of piling up in an open chunk.
        if builder is self._open and len(builder.steps) >= (self._chunk_length or self._keep):
            self._finalize(builder)

    def _append_general(self, data: Any, partial_step: bool):
        """Steps with missing or new columns, partial steps, other structures."""
        with_paths = tree.flatten_with_path(data) if data is not None else []
        if self._structure is None or any(path not in self._path_index for path, _ in with_paths):
            self._grow_structure(data)
        columns = self._path_index
        for path, _ in with_paths:
            if path not in columns:
                raise errors.InvalidArgumentError(
                    f"the step has a leaf at {path}, where the writer's earlier steps have a nest of "
                    "other structure")
        step_open = self._open_row is not None
        values: Dict[int, np.ndarray] = {}
        for path, leaf in with_paths:
            if leaf is None:
                continue
            column = columns[path]
            if step_open and self._history[column][-1] is not None:
                raise errors.InvalidArgumentError(
                    f"Field {path} has already been set in the active step by previous (partial) "
                    f"append call and thus must be omitted or set to None but got: {leaf}")
            value = np.asarray(leaf)
            if value.dtype.hasobject:
                raise errors.InvalidArgumentError(
                    f"column {path} holds Python objects (dtype object); use numeric or fixed-width "
                    "string arrays")
            slot = self._column_slot[column]
            if slot is not None:
                shape, dtype = self._leaf_specs[slot]
                if value.dtype != dtype and not _both_strings(value.dtype, dtype):
                    raise errors.InvalidArgumentError(
                        f"Tensor of wrong dtype provided for column {path}. Got "
                        f"{_dtype_text(value.dtype, dtype)} but expected {_dtype_text(dtype, value.dtype)}.")
                if value.shape != shape:
                    raise errors.InvalidArgumentError(
                        f"Tensor of incompatible shape provided for column {path}. Got "
                        f"{specs.tf_shape_text(value.shape)} which is incompatible with "
                        f"{specs.tf_shape_text(shape)}.")
            values[column] = value
        new_columns = [c for c in values if self._column_slot[c] is None]
        if new_columns:
            if self._open is not None and self._open.steps:
                self._finalize(self._open)  # a chunk's steps all have the same leaves
            first = self._leaf_specs is None
            for column in sorted(new_columns):
                self._add_slot(column, values[column])
            if first:
                self._size_in_flight(list(values.values()))
        # the step's row: the open step's, while its chunk is open; else a new row
        builder = self._open
        if step_open and self._open_row_builder is builder and builder is not None:
            row, offset = self._open_row, self._open_offset
        else:
            if builder is None:
                builder = self._open = _ChunkBuilder(self._new_key(), self._weak_self, self._episode_id,
                                                     self._episode_step, self._serial)
            row = list(self._zeros)
            offset = len(builder.steps)
            builder.steps.append(row)
            builder.live_steps += 1
            if step_open:
                self._open_step_builders.append(builder)
            else:
                self._open_step_builders = [builder]
        refs: Dict[int, CellRef] = {}
        for column, value in values.items():
            slot = self._column_slot[column]
            row[slot] = value
            shape, dtype = self._leaf_specs[slot]
            refs[column] = CellRef(builder, offset, slot, shape, dtype, value)
        if step_open:
            for column, ref in refs.items():
                self._history[column][-1] = ref
        else:
            for column, history in enumerate(self._history):
                history.append(refs.get(column))
            self._history_count[0] += 1
        if partial_step:
            self._open_row, self._open_row_builder, self._open_offset = row, builder, offset
            self._dense = False
        else:
            builders = self._open_step_builders
            self._open_row = self._open_row_builder = self._open_step_builders = None
            self._update_dense()
            self._complete_step(builder, builders[0] if len(builders) == 1 else tuple(builders))
        if data is None or not tree.is_nested(data):
            return refs.get(columns.get((), -1))
        return tree.unflatten_as(data, [refs.get(columns[path]) for path, _ in with_paths])

    def _grow_structure(self, data: Any) -> None:
        """Adds the columns of `data`'s new paths (after the existing ones, in flatten order)."""
        shape = tree.map_structure(lambda _: None, data)
        try:
            union = shape if self._structure is None else _tree_union(self._structure, shape)
        except (AttributeError, TypeError, KeyError) as e:
            raise errors.InvalidArgumentError(
                f"the step's structure does not extend the earlier steps' structure ({e!r}): a step may "
                "lack leaves or add new ones, but not turn a dict into a sequence or a leaf into a nest") from None
        grown = []
        for path, column in tree.flatten_with_path(union):
            if column is None:
                column = self._path_index.get(path)
            if column is None:
                column = len(self._paths)
                self._paths.append(path)
                self._path_index[path] = column
                self._column_slot.append(None)
                # a new column has no value in the steps before
                cells = collections.deque([None] * min(self._keep, self._history_count[0]), maxlen=self._keep)
                self._history.append(cells)
            grown.append(column)
        self._structure = tree.unflatten_as(union, grown)
        self._history_nest = None
        self._one_leaf = not tree.is_nested(self._structure)
        self._update_dense()

    def _add_slot(self, column: int, value: np.ndarray) -> None:
        slot = len(self._zeros)
        self._column_slot[column] = slot
        if self._leaf_specs is None:
            self._leaf_specs = []
        self._leaf_specs.append((value.shape, value.dtype))
        # (None for strings: steps of a string leaf may differ in width, see _both_strings)
        self._leaf_dtype_strs.append(None if value.dtype.kind in "SU" else value.dtype.str)
        self._zeros.append(np.zeros(value.shape, value.dtype))
        # per leaf: chunks left to skip, failed tries in a row, the next skip's length
        self._compress_hints.append([0, 0, _INCOMPRESSIBLE_SKIP])
        self._update_dense()

    def _update_dense(self) -> None:
        """Turns the fast path on when every column has a slot, the slots and the columns are in
        the order of a step's flattened leaves, and no partial step is open. (A column added
        later whose path sorts before earlier ones keeps the writer on the general path.)"""
        self._dense = (bool(self._paths) and self._open_row is None
                       and all(slot == i for i, slot in enumerate(self._column_slot))
                       and tree.flatten(self._structure) == list(range(len(self._paths))))
        self._dict_keys = self._first_key_order = None
        if not self._dense:
            return
        structure = self._structure
        # A flat dict of plain leaves (what rollout workers write) gets the fast paths of
        # _step_leaves and _refs_nest; tree.flatten orders a dict's leaves by sorted key.
        if type(structure) is dict and structure and all(type(v) is int for v in structure.values()):
            try:
                self._dict_keys = sorted(structure)
            except TypeError:
                return  # keys of mixed types: leave them to dm-tree
            if list(structure) != self._dict_keys:
                self._first_key_order = list(structure)

    def _step_leaves(self, data) -> Optional[List[np.ndarray]]:
        """The leaves of a whole step in column order, if it has exactly the known columns and
        none is None; else None (the general path handles it).

        A plain dict of arrays with the known keys, or a single array, skips dm-tree (the
        per-step cost that matters when every step is written).
        """
        keys = self._dict_keys
        if keys is not None and type(data) is dict and len(data) == len(keys):
            try:
                values = [data[k] for k in keys]
            except KeyError:
                return None
            if all(type(v) in _PLAIN_LEAF_TYPES for v in values):
                return [np.asarray(v) for v in values]
        elif self._one_leaf:
            if type(data) in _PLAIN_LEAF_TYPES:
                return [data if type(data) is np.ndarray else np.asarray(data)]
            if data is None or tree.is_nested(data):
                return None
            value = np.asarray(data)
            return None if value.dtype.hasobject else [value]
        flat = tree.flatten(data)
        if len(flat) != len(self._paths) or any(x is None for x in flat) or not _same_structure(
                self._structure, data):
            return None
        leaves = [np.asarray(x) for x in flat]
        for leaf in leaves:
            if leaf.dtype.hasobject:
                return None
        return leaves

    def _refs_nest(self, data, refs: List[CellRef]) -> Any:
        """The step's CellRefs in the structure of `data` (as dm-tree's unflatten_as would)."""
        keys = self._dict_keys
        if keys is not None and type(data) is dict:  # this step passed the flat dict checks
            by_key = dict(zip(keys, refs))
            if self._first_key_order is None:
                return by_key  # the first step's keys were in sorted order
            return {k: by_key[k] for k in self._first_key_order}
        return tree.unflatten_as(self._structure, refs)

    def _raise_spec_mismatch(self, slot: int, leaf: np.ndarray) -> None:
        shape, dtype = self._leaf_specs[slot]
        path = self._paths[self._column_slot.index(slot)]
        if leaf.dtype != dtype and not _both_strings(leaf.dtype, dtype):
            raise errors.InvalidArgumentError(
                f"Tensor of wrong dtype provided for column {path}. Got "
                f"{_dtype_text(leaf.dtype, dtype)} but expected {_dtype_text(dtype, leaf.dtype)}.")
        raise errors.InvalidArgumentError(
            f"Tensor of incompatible shape provided for column {path}. Got "
            f"{specs.tf_shape_text(leaf.shape)} which is incompatible with {specs.tf_shape_text(shape)}.")

