"""TrajectoryWriter: writes steps to a replay server and builds items from any kept-alive cells.

This is how rollout workers put experience into the replay service, with the API and semantics
of Reverb 0.14's `TrajectoryWriter` (`replay.reverb.TrajectoryWriter` is this class). Each
`append` adds one step (a nest of arrays; a None leaf leaves that column out of the step, and
`partial_step=True` builds a step over several calls). `history` gives, column by column, a
`_ColumnHistory` indexed like a list of every step since the episode began (non-negative indices
count from its start, negative ones from its end), of which only the last `num_keep_alive_refs`
steps can still be referenced; an item is any slices of them (`writer.history['obs'][-3:]`),
for any table, overlapping other items. Steps are grouped into chunks (column-wise,
lz4-compressed, see `replay.chunks`); every chunk is sent once, with the first item that needs
it, however many items and tables reference it.

Sending is asynchronous (`replay.insert_stream.InsertStream`): items and chunks go into a
queue that a gRPC request iterator drains, many per message, while a background thread counts
the server's batched acks. A call blocks only when the stream's window of unacknowledged items
(at most `max_in_flight_items`) or bytes is full; the window falls to a few items while a
table's rate limiter holds the writer's inserts back, so the writer waits in `append` and
`create_item` instead of running ahead of the limiter. `flush` waits for acks. If the stream
fails (bad item, server gone), the next call raises the error. With `validate_items`,
`create_item` checks the item against the table's signature (fetched once per client with
`server_info`), as Reverb's writer does.

Chunking: with `chunk_length=None` a chunk is closed as soon as an item references one of its
steps (items go out immediately, chunks hold the steps since the previous chunk). With a
`chunk_length`, chunks are closed every `chunk_length` steps (better compression) and items
referencing the open chunk wait until it closes, at `flush` or at `end_episode`. Columns are
lz4-compressed, except that a leaf whose data stopped compressing (random or pre-compressed
data) is stored raw for a while before lz4 is tried again. A chunk holds every column that had
a value by its first step (zeros where a step left a column out, which no item can reference).

Its parts: the references it hands out (`replay.trajectory_columns`), its chunk builder and
compression constants (`replay.trajectory_chunks`), the signature check
(`replay.item_signature_check`) and the comparisons of steps (`replay.step_structure`).
"""
from __future__ import annotations

import collections
import datetime
import itertools
import os
import random
import weakref
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tree

from replay import errors, specs, validation
from replay.chunks import encode_column, encode_raw_step
from replay.codec import ChunkRow
from replay.insert_stream import InsertStream
from replay.item_signature_check import _check_against_signature, _table_signature
from replay.step_structure import _both_strings, _dtype_text, _same_structure, _tree_union
from replay.trajectory_chunks import (
    _ADAPTIVE_MIN_BYTES,
    _INCOMPRESSIBLE_MAX_SKIP,
    _INCOMPRESSIBLE_SKIP,
    _INCOMPRESSIBLE_TRIES,
    _ChunkBuilder,
    _item_columns,
)
from replay.trajectory_columns import CellRef, TrajectoryColumn, _cell, _ColumnHistory

# Without an explicit max_in_flight_items, a writer lets up to _AUTO_IN_FLIGHT_BYTES of steps be
# unacknowledged, counted in steps of its first step's size, within these bounds. Small steps
# need many items in flight to keep a server busy while the writer fills the next message
# (400 B steps: 10-15% more items/s with 4,000 than with 1,000, and 5% more again with the 10,485
# of 4 MB than with 4,000, from four writers); large ones do not.
_AUTO_IN_FLIGHT_BYTES = 4 * 1024 * 1024
_MIN_AUTO_IN_FLIGHT_ITEMS = 1000
_MAX_AUTO_IN_FLIGHT_ITEMS = 16000
# Types dm-tree never treats as nests: a step leaf of one of these needs no structure walk.
_PLAIN_LEAF_TYPES = frozenset((np.ndarray, np.float32, np.float64, np.int64, np.int32, np.bool_,
                               np.uint8, float, int, bool))
# A writer dropped without close() waits at most this long for its items' acks before it closes
# (Reverb's waits without a limit).
_DROPPED_WRITER_FLUSH_SECONDS = 30.0


class TrajectoryWriter:
    """Writes steps and items over one InsertStream (see the module docstring).

    Create it with `Client.trajectory_writer(num_keep_alive_refs, ...)`.

    Args:
      client: the `Client`.
      num_keep_alive_refs: how many of the latest steps items may reference (None: the
        client's `max_num_keep_alive_refs`, for the one-argument form of Reverb's constructor).
      chunk_length: steps per chunk; None closes a chunk when an item references it.
      delta_encoded: delta-encode integer columns of rank >= 1 per step along time.
      max_in_flight_items: the most unacknowledged items before calls block. None (the
        default): sized from the first step, as many as 4 MB of such steps, 1,000 to 16,000
        items. The stream's window stays within it and within 16 MB of chunk bytes, and is
        smaller while rate limiters hold inserts back (see `replay.insert_stream`).
      call_timeout: seconds the writer's stream may last (its gRPC deadline; None: no limit).
        For one-shot writes such as `Client.insert`: when it passes, the stream fails with
        DeadlineExceededError and the server cancels inserts it has not made yet.
      validate_items: check each item against its table's signature in `create_item` (Reverb's
        option of the same name, which `Client.trajectory_writer` sets by default); the
        signatures are fetched with `server_info` once per client, within
        `get_signature_timeout_ms` (None: no limit).

    Raises:
      InvalidArgumentError: non-positive num_keep_alive_refs, chunk_length or max_in_flight_items.
    """

    def __init__(self, client, num_keep_alive_refs: Optional[int] = None, chunk_length: Optional[int] = None,
                 delta_encoded: bool = False, max_in_flight_items: Optional[int] = None,
                 call_timeout: Optional[float] = None, *, validate_items: bool = False,
                 get_signature_timeout_ms: Optional[int] = None):
        if num_keep_alive_refs is None:
            # Reverb's constructor takes only its internal writer, which knows this number.
            num_keep_alive_refs = getattr(client, "max_num_keep_alive_refs", 0)
        if num_keep_alive_refs < 1:
            raise errors.InvalidArgumentError(
                f"num_keep_alive_refs ({num_keep_alive_refs}) must be a positive integer")
        if chunk_length is not None and chunk_length <= 0:
            raise errors.InvalidArgumentError(f"chunk_length must be positive or None, got {chunk_length}")
        if max_in_flight_items is not None and max_in_flight_items <= 0:
            raise errors.InvalidArgumentError(
                f"max_in_flight_items must be positive, got {max_in_flight_items}")
        self._client = client
        self._keep = int(num_keep_alive_refs)
        self._chunk_length = chunk_length
        self._delta = bool(delta_encoded)
        self._auto_in_flight = max_in_flight_items is None
        self._weak_self = weakref.ref(self)
        self._stream = _StreamOnFirstUse(self._weak_self, client, max_in_flight_items or _MIN_AUTO_IN_FLIGHT_ITEMS,
                                         call_timeout)
        self._validate_items = bool(validate_items)
        self._signature_timeout = None if get_signature_timeout_ms is None else get_signature_timeout_ms / 1000
        self._valid_layouts: Dict[str, set] = {}  # table -> item layouts that fit its signature
        self._rng = random.Random(os.urandom(16))
        self._keys = _random_keys(self._rng)  # (not a method: the generator would hold self)
        # Columns, in the order they first appeared (Reverb's column indices), and slots: the
        # leaves of a chunk's steps, one per column that has had a value, in that order.
        self._structure = None  # the union of the steps' structures, leaves: column indices
        self._paths: List[tuple] = []  # column -> path
        self._path_index: Dict[tuple, int] = {}  # path -> column
        self._column_slot: List[Optional[int]] = []  # column -> slot, None until it has a value
        self._leaf_specs: Optional[List[Tuple[tuple, np.dtype]]] = None  # slot -> (shape, dtype)
        self._leaf_dtype_strs: List[Optional[str]] = []
        self._zeros: List[np.ndarray] = []  # slot -> the value of a step without it
        self._compress_hints: List[list] = []
        # The fast path's state: set while every column has a slot in column order and steps
        # are whole; a flat dict of plain leaves skips dm-tree (see _step_leaves).
        self._dense = False
        self._one_leaf = False  # the steps are one array, not a nest
        self._dict_keys: Optional[List[Any]] = None
        self._first_key_order: Optional[List[Any]] = None
        self._history: List[Deque[Optional[CellRef]]] = []  # column -> kept cells
        self._history_count = [0]  # steps in the history (shared with its _ColumnHistory views)
        self._history_nest = None  # what `history` returns, until the structure grows
        self._column_configs: Dict[tuple, Tuple[int, Optional[int]]] = {}
        # A step built by append(..., partial_step=True): the builders holding its rows (more
        # than one when a chunk closed while it was open), its row and the columns set so far.
        self._open_step_builders: Optional[List[_ChunkBuilder]] = None
        self._open_row: Optional[list] = None
        self._open_row_builder: Optional[_ChunkBuilder] = None
        self._open_offset = 0
        self._window: Deque[Any] = collections.deque()  # per kept step: its builder (or a tuple)
        self._open: Optional[_ChunkBuilder] = None
        self._pending: Deque[Tuple[str, float, int, list, list]] = collections.deque()
        # Keys of sent chunks no item will reference again; they go out with the next message
        # rather than as a message of their own.
        self._releases: List[int] = []
        self._episode_id = self._new_key()
        self._episode_step = 0
        self._serial = 0  # steps appended over all episodes
        self._closed = False

    def _new_key(self) -> int:
        return next(self._keys)

    # -- properties ------------------------------------------------------------------------

    @property
    def episode_steps(self) -> int:
        """Steps completed in the current episode (a partial step counts once complete)."""
        return self._episode_step

    @property
    def max_num_keep_alive_refs(self) -> int:
        """How many of the latest steps items may reference."""
        return self._keep

    @property
    def max_in_flight_items(self) -> int:
        return self._stream.max_in_flight_items

    @property
    def num_unacked_items(self) -> int:
        """Items sent (or queued) that the server has not acknowledged yet."""
        return self._stream.num_unacked

    def configure(self, path: tuple, *, num_keep_alive_refs: int, max_chunk_length: Optional[int]) -> None:
        """Reverb's per-column chunking options. Accepted and validated; this writer chunks all
        columns together with its own `chunk_length` and keeps `num_keep_alive_refs` steps of
        every column, so the values have no further effect.

        Raises:
          InvalidArgumentError (a ValueError): num_keep_alive_refs < 1, or max_chunk_length < 1
            or > num_keep_alive_refs.
        """
        if num_keep_alive_refs < 1:
            raise errors.InvalidArgumentError(
                f"num_keep_alive_refs ({num_keep_alive_refs}) must be a positive integer")
        if max_chunk_length is not None and not 1 <= max_chunk_length <= num_keep_alive_refs:
            raise errors.InvalidArgumentError(
                f"max_chunk_length ({max_chunk_length}) must be None or a positive integer <= "
                f"num_keep_alive_refs ({num_keep_alive_refs})")
        self._column_configs[path] = (num_keep_alive_refs, max_chunk_length)

    # -- steps ---------------------------------------------------------------------------

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

    def _size_in_flight(self, leaves: List[np.ndarray]) -> None:
        """Without an explicit max_in_flight_items: as many items as _AUTO_IN_FLIGHT_BYTES of
        steps like the first, within bounds."""
        if self._auto_in_flight:
            step_bytes = sum(leaf.nbytes for leaf in leaves)
            self._stream.max_in_flight_items = min(
                _MAX_AUTO_IN_FLIGHT_ITEMS,
                max(_MIN_AUTO_IN_FLIGHT_ITEMS, _AUTO_IN_FLIGHT_BYTES // max(step_bytes, 1)))

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

    def extend(self, steps: Any) -> None:
        """Appends n whole steps in one call: what `for step in steps: append(step)` does, with
        the work per call instead of per step (an extension of Reverb's API, for vectorised
        environments and fragments).

        `steps` is either a batch, a nest like `append`'s whose leaves have a leading dimension
        of n (rows in step order), or a list of n steps (a list whose items are nests, or any
        list when the writer's steps are single arrays). Steps older than the last
        `num_keep_alive_refs` can never be referenced, so only those are kept; they form a
        closed chunk (chunks of `chunk_length` with one) and stay in `history`.

        Raises:
          InvalidArgumentError: leaves of different lengths or without a leading dimension, a
            structure, dtype or row shape other than the writer's steps, a None or Python
            object leaf, an open partial step. CancelledError: the writer is closed.
        """
        self._check_open()
        if type(steps) is list and steps and (self._one_leaf or all(tree.is_nested(x) for x in steps)):
            structure = steps[0]
            try:
                leaves = [np.stack(column) for column in zip(*(tree.flatten(step) for step in steps))]
                for step in steps[1:]:
                    tree.assert_same_structure(structure, step)
            except (ValueError, TypeError) as e:
                raise errors.InvalidArgumentError(
                    f"extend needs steps of one structure and leaves of one shape and dtype: {e}") from None
        else:
            structure = steps
            leaves = self._batch_leaves(steps, "extend")
        n = leaves[0].shape[0]
        if n == 0:
            return
        first_step = tree.unflatten_as(structure, [leaf[0] for leaf in leaves]) if tree.is_nested(
            structure) else leaves[0][0]
        self._check_rows(first_step, leaves, "extend")
        if self._open is not None:
            self._finalize(self._open, send=False)
        kept = min(self._keep, n)
        self._append_rows(leaves, n - kept, n, self._chunk_length or kept)
        self._history_count[0] += n
        self._episode_step += n
        self._serial += n

    def append_step_items(self, table: str, steps: Any, priorities: Any = None) -> None:
        """Appends the n steps of `steps` and creates, for each, one item of `table` holding that
        step alone: what `for t in range(n): create_item(table, priorities[t], append(step_t))`
        does (step_t: every leaf's row t), with the work per chunk instead of per step.

        `steps` is a nest like `append`'s whose leaves have a leading dimension of n (rows in
        step order); `priorities` holds n numbers (None: all 1.0). The steps start a new chunk
        and fill chunks of `chunk_length` (without one, each step is its own chunk, as items
        close chunks then); the last `num_keep_alive_refs` of them stay in `history`.

        Raises:
          InvalidArgumentError: leaves of different lengths, a structure, dtype or row shape
            other than the first step's, a leaf of Python objects, a bad priority or count of
            priorities, an open partial step; SignatureMismatchError as `create_item`.
          CancelledError: the writer is closed. Errors of the stream (see `flush`).
        """
        self._check_open()
        leaves = self._batch_leaves(steps, "append_step_items")
        n = leaves[0].shape[0]
        if priorities is None:
            priorities = np.ones(n)
        priorities = np.asarray(priorities, np.float64).reshape(-1)
        if priorities.shape[0] != n:
            raise errors.InvalidArgumentError(
                f"{priorities.shape[0]} priorities for {n} steps; give one per step")
        bad = ~(priorities >= 0.0) | np.isinf(priorities)
        if bad.any():
            raise errors.InvalidArgumentError(
                f"priority must be a finite number >= 0, got {priorities[bad][0]} (step "
                f"{int(np.flatnonzero(bad)[0])})")
        if n == 0:
            return
        first_step = tree.unflatten_as(steps, [leaf[0] for leaf in leaves]) if tree.is_nested(
            steps) else leaves[0][0]
        self._check_rows(first_step, leaves, "append_step_items")
        if self._validate_items:
            layout = tuple((slot, 1, True) for slot in range(len(leaves)))
            fitting = self._valid_layouts.get(table)
            if fitting is None or layout not in fitting:
                signature = _table_signature(self._client, table, self._signature_timeout)
                if signature is not None:
                    _check_against_signature(table, signature, list(self._leaf_specs))
                self._valid_layouts.setdefault(table, set()).add(layout)
        if self._open is not None:
            self._finalize(self._open, send=False)
        for builder in self._append_rows(leaves, 0, n, self._chunk_length or 1):
            chunk_key = builder.key
            builders = [builder]
            start = builder.start_serial - self._serial
            builder.pending_items = len(builder.columns[0])
            for offset in range(builder.pending_items):
                wire_columns = [(True, ((chunk_key, offset, 1, leaf),)) for leaf in range(len(leaves))]
                self._pending.append((table, float(priorities[start + offset]), self._new_key(),
                                      wire_columns, builders))
        self._history_count[0] += n
        self._episode_step += n
        self._serial += n
        self._send_ready()

    def _batch_leaves(self, steps: Any, what: str) -> List[np.ndarray]:
        """The leaves of a batch of steps, each with the same leading dimension.

        Raises:
          InvalidArgumentError: no leaves, a leaf without a leading dimension, different lengths.
        """
        leaves = [np.asarray(x) for x in tree.flatten(steps)]
        if not leaves or any(leaf.ndim == 0 for leaf in leaves):
            raise errors.InvalidArgumentError(f"{what} needs leaves with a leading dimension of steps")
        n = leaves[0].shape[0]
        if any(leaf.shape[0] != n for leaf in leaves):
            raise errors.InvalidArgumentError(
                f"the leaves hold different numbers of steps {[leaf.shape[0] for leaf in leaves]}; "
                "every leaf needs one row per step")
        return leaves

    def _check_rows(self, first_step: Any, leaves: List[np.ndarray], what: str) -> None:
        """Defines the columns from a batch's first step, or checks the batch against them.

        Raises:
          InvalidArgumentError: another structure, a None or object leaf, other row specs, an
            open partial step.
        """
        if not self._paths:
            self._define_columns(first_step, [leaf[0] for leaf in leaves])
        if not self._dense or self._step_leaves(first_step) is None:
            raise errors.InvalidArgumentError(
                f"{what} needs whole steps with the structure of the writer's steps, every leaf a "
                "value, and no open partial step")
        for i, (leaf, (shape, dtype)) in enumerate(zip(leaves, self._leaf_specs)):
            if leaf.shape[1:] != shape or (leaf.dtype != dtype and not _both_strings(leaf.dtype, dtype)):
                raise errors.InvalidArgumentError(
                    f"leaf {i} ({self._paths[i]}) has rows of shape {leaf.shape[1:]} and dtype "
                    f"{leaf.dtype}, but the writer's steps have {shape} and {dtype}")

    def _append_rows(self, leaves: List[np.ndarray], first: int, n: int, per_chunk: int) -> List["_ChunkBuilder"]:
        """Closed chunks of rows first..n-1 of a batch of n steps (row r is the writer's next
        step + r), each of up to `per_chunk` rows; the batch's last num_keep_alive_refs steps
        go into the history and the window. The caller then advances the step counters by n.
        """
        keep = self._keep
        window, histories = self._window, self._history
        first_kept = n - min(keep, n)
        base_index, base_serial = self._episode_step, self._serial
        built = []
        entering = []  # (builder, its kept steps), in step order
        for start in range(first, n, per_chunk):
            end = min(n, start + per_chunk)
            builder = _ChunkBuilder(self._new_key(), self._weak_self, self._episode_id,
                                    base_index + start, base_serial + start)
            builder.steps = None
            builder.columns = builder.rows = [leaf[start:end] for leaf in leaves]
            builder.closed = True
            built.append(builder)
            lo = max(start, first_kept)
            count = end - lo
            if count > 0:
                # (the history holds (builder, offset, leaf) for these steps, made a whole
                # column at a time, and their CellRefs are made when first asked for: this is
                # the per-step cost of a batch)
                builder.live_steps += count
                for i, history in enumerate(histories):
                    history.extend(zip(itertools.repeat(builder, count), range(lo - start, end - start),
                                       itertools.repeat(i, count)))
                entering.append((builder, count))
        # The oldest steps leave the window for the entering ones (never more than it holds,
        # since at most num_keep_alive_refs steps enter).
        leaving = len(window) + sum(count for _, count in entering) - keep
        if leaving > 0:
            left = collections.Counter(itertools.islice(window, leaving))
            staying = list(itertools.islice(window, leaving, None))
            window.clear()
            window.extend(staying)
            for old, count in left.items():
                for b in (old if type(old) is tuple else (old,)):
                    b.live_steps -= count
                    if b.live_steps == 0 and b is not self._open:
                        self._maybe_release(b)
        for builder, count in entering:
            window.extend(itertools.repeat(builder, count))
        return built

    def _define_columns(self, first_step: Any, leaves: List[np.ndarray]) -> None:
        """The columns and slots of a first step given whole (`append_step_items`)."""
        for i, leaf in enumerate(leaves):
            if leaf.dtype.hasobject:
                raise errors.InvalidArgumentError(
                    f"leaf {i} holds Python objects (dtype object); use numeric or fixed-width string arrays")
        self._grow_structure(first_step)
        for column, leaf in enumerate(leaves):
            self._add_slot(column, leaf)
        self._size_in_flight(leaves)

    @property
    def history(self) -> Any:
        """Every step's cells since the episode began: a nest (the union of the steps'
        structures) of `_ColumnHistory`, one per column (see there for indexing).

        Raises:
          FailedPreconditionError (a RuntimeError): nothing was appended yet.
        """
        nest = self._history_nest
        if nest is None:
            if not self._paths:
                raise errors.FailedPreconditionError(
                    "history cannot be accessed before `append` is called at least once.")
            # views of the deques, which change in place: built again only when columns are added
            columns = [_ColumnHistory(path, cells, self._history_count)
                       for path, cells in zip(self._paths, self._history)]
            nest = self._history_nest = (columns[0] if self._one_leaf
                                         else tree.unflatten_as(self._structure,
                                                                [columns[c] for c in tree.flatten(self._structure)]))
        return nest

    # -- items ---------------------------------------------------------------------------

    def create_item(self, table: str, priority: float, trajectory: Any) -> None:
        """Creates an item for `table` whose columns are the leaves of `trajectory`, each a
        `TrajectoryColumn` (from `history`; or, an extension, a `CellRef`: one step without time
        dimension). The item is sent without blocking (see `flush`).

        Raises:
          InvalidArgumentError (a ValueError): an empty trajectory, a NaN, negative or infinite
            priority, an expired reference ("Error in column i: Column contains expired
            CellRef."), a column mixing dtypes or shapes; with `validate_items`, a table the
            server does not have, or SignatureMismatchError (a ValueError) for a trajectory
            inconsistent with the table's signature.
          TypeError: a leaf that is not a TrajectoryColumn (or CellRef).
          CancelledError (a RuntimeError): the writer is closed. Errors of the stream, and of
            `server_info` when the signatures are fetched.
        """
        if self._closed:
            self._check_open()
        leaf_type = type(trajectory)
        if leaf_type is TrajectoryColumn and trajectory.is_squeezed:
            cell = trajectory._data_references[0]  # noqa: SLF001 - same module
        elif leaf_type is CellRef:
            cell = trajectory
        else:
            cell = None
        if cell is not None and self._kept_alive(cell):
            # `_add_item` for one kept-alive cell (a one-leaf step item), without its loops
            priority = float(priority)
            if priority != priority:
                raise errors.InvalidArgumentError("`priority` must not be nan.")
            key = self._new_key()
            validation.check_priority(key, priority)
            if self._validate_items:
                self._check_signature(table, ((cell,),), (True,))
            builder = cell._builder  # noqa: SLF001 - CellRef belongs to this module
            if self._chunk_length is None and builder is self._open:
                self._finalize(builder, send=False)
            builder.pending_items += 1
            self._pending.append((table, priority, key, [(True, ((builder.key, cell.offset, 1, cell.leaf),))],
                                  (builder,)))
            self._send_ready()
            return
        # A lone column (a one-leaf step) needs no structure walk.
        leaves = ((trajectory,) if leaf_type is TrajectoryColumn or leaf_type is CellRef
                  else tree.flatten(trajectory))
        columns, builders = [], []
        runs = None  # per column: its run of one chunk's cells (see TrajectoryColumn._run), if any
        empty = expired = None  # the first empty column, the first with an expired cell
        multi = False  # whether a column has several cells
        floor = self._serial - self._keep  # the first kept-alive step (see _kept_alive)
        for index, leaf in enumerate(leaves):
            leaf_type = type(leaf)
            if leaf_type is TrajectoryColumn:
                run = leaf._run  # noqa: SLF001 - same module
                if run is not None:
                    # one chunk's cells of consecutive steps, the first the oldest; its CellRefs
                    # are not needed (the column itself stands for them below)
                    columns.append((leaf, False))
                    if runs is None:
                        runs = [None] * index
                    runs.append(run)
                    builder = run[0]
                    if builder.released or builder.start_serial + run[1] < floor:
                        expired = index if expired is None else expired
                    if builder not in builders:
                        builders.append(builder)
                    continue
                cells = leaf._data_references  # noqa: SLF001 - same module
                columns.append((cells, leaf.is_squeezed))
            elif leaf_type is CellRef:
                cells = (leaf,)
                columns.append((cells, True))
            else:
                raise TypeError(f"All leaves of `trajectory` must be `TrajectoryColumn` but got {trajectory}")
            if runs is not None:
                runs.append(None)
            if len(cells) != 1:
                if not cells:
                    empty = index if empty is None else empty
                    continue
                multi = True
            for cell in cells:
                builder = cell._builder  # noqa: SLF001 - same module
                if builder.released or builder.start_serial + cell.offset < floor:
                    expired = index if expired is None else expired
                if builder not in builders:
                    builders.append(builder)
        if len(builders) == 0:
            raise errors.InvalidArgumentError("trajectory must not be empty.")
        priority = float(priority)
        if priority != priority:
            raise errors.InvalidArgumentError("`priority` must not be nan.")
        for index, (cells, _) in (enumerate(columns) if multi or expired is not None or empty is not None
                                  else ()):
            if index == expired:
                raise errors.InvalidArgumentError(f"Error in column {index}: Column contains expired CellRef.")
            if index == empty:
                raise errors.InvalidArgumentError(f"Error in column {index}: the column references no steps.")
            if len(cells) > 1 and (runs is None or runs[index] is None):  # (a run is of one column)
                self._check_column(index, cells)
        key = self._new_key()
        validation.check_priority(key, priority)
        if self._validate_items:
            self._check_signature(table, [cells for cells, _ in columns], [sq for _, sq in columns])
        if self._chunk_length is None and self._open is not None and self._open in builders:
            self._finalize(self._open, send=False)
        for builder in builders:
            builder.pending_items += 1
        self._pending.append((table, priority, key, _item_columns(columns, runs), builders))
        self._send_ready()

    def _check_column(self, index: int, cells: Sequence[CellRef]) -> None:
        """Reverb's TrajectoryColumn::Validate: the cells of a column have one dtype and shape.

        Raises:
          InvalidArgumentError: they do not.
        """
        first = cells[0]
        for i, cell in enumerate(cells):
            if cell.dtype != first.dtype and not _both_strings(cell.dtype, first.dtype):
                raise errors.InvalidArgumentError(
                    f"Error in column {index}: Column references tensors with different dtypes: "
                    f"{specs.tf_dtype_name(first.dtype)} (index 0) != {specs.tf_dtype_name(cell.dtype)} "
                    f"(index {i}).")
            if cell.shape != first.shape:
                raise errors.InvalidArgumentError(
                    f"Error in column {index}: Column references tensors with incompatible shapes: "
                    f"{specs.tf_shape_text(first.shape)} (index 0) not compatible with "
                    f"{specs.tf_shape_text(cell.shape)} (index {i}).")

    def _check_signature(self, table: str, columns: Sequence[Any], squeezed: Sequence[bool]) -> None:
        """Reverb's ItemAndRefs::Validate: the item's columns (dtype, and shape with the time
        dimension unless squeezed) against the table's signature, fetched once per client. A
        layout (per column: its slot, length and squeeze flag) found to fit is remembered.

        Raises:
          InvalidArgumentError: the server has no such table; SignatureMismatchError: the
            columns do not fit the signature. Errors of `server_info`.
        """
        # (a column may be a TrajectoryColumn of one run, whose CellRefs are made only if needed)
        layout = tuple((cells._run[3] if type(cells) is TrajectoryColumn else cells[0].leaf,  # noqa: SLF001
                        len(cells), sq) for cells, sq in zip(columns, squeezed))
        fitting = self._valid_layouts.get(table)
        if fitting is not None and layout in fitting:
            return
        signature = _table_signature(self._client, table, self._signature_timeout)
        if signature is not None:
            columns = [cells._data_references if type(cells) is TrajectoryColumn else cells  # noqa: SLF001
                       for cells in columns]
            got = [(tuple(cells[0].shape) if sq else (len(cells), *cells[0].shape), cells[0].dtype)
                   for cells, sq in zip(columns, squeezed)]
            _check_against_signature(table, signature, got)
        if fitting is None:
            fitting = self._valid_layouts[table] = set()
        fitting.add(layout)

    def create_item_from_last_steps(self, table: str, priority: float, num_steps: int) -> None:
        """Creates an item of every column's last `num_steps` steps (with a time dimension), as
        `create_item` with `history[column][-num_steps:]` for each column, without building the
        references (the legacy `Writer`'s path). The caller checks that `num_steps` steps of
        this episode are kept alive.

        Raises:
          InvalidArgumentError: a bad priority, a column without a value in one of the steps;
            SignatureMismatchError as `create_item`.
          CancelledError: the writer is closed; any error the stream failed with.
        """
        if self._closed:
            self._check_open()
        priority = float(priority)
        key = self._new_key()
        validation.check_priority(key, priority)
        if num_steps == 1:
            columns = [((_cell(history[-1]),), False) for history in self._history]
        else:
            columns = [(tuple(map(_cell, tuple(history)[-num_steps:])), False) for history in self._history]
        for column, (cells, _) in enumerate(columns):
            if None in cells:
                raise errors.InvalidArgumentError(
                    f"column {self._paths[column]} has no value in some of the last {num_steps} steps")
        if self._validate_items:
            self._check_signature(table, [cells for cells, _ in columns], [False] * len(columns))
        self._add_item(table, priority, key, columns)

    def _add_item(self, table: str, priority: float, key: int, columns: list) -> None:
        builders = []
        floor = self._serial - self._keep  # the first kept-alive step (see _kept_alive)
        for cells, _ in columns:
            for cell in cells:
                builder = cell._builder  # noqa: SLF001 - CellRef belongs to this module
                if builder.released or builder.start_serial + cell.offset < floor:
                    raise errors.InvalidArgumentError("Column contains expired CellRef.")
                if builder not in builders:
                    builders.append(builder)
        if self._chunk_length is None and self._open is not None and self._open in builders:
            self._finalize(self._open, send=False)
        for builder in builders:
            builder.pending_items += 1
        self._pending.append((table, priority, key, _item_columns(columns), builders))
        self._send_ready()

    def _kept_alive(self, cell: CellRef) -> bool:
        builder = cell._builder  # noqa: SLF001 - CellRef belongs to this module
        return not builder.released and builder.start_serial + cell.offset >= self._serial - self._keep

    def _finalize(self, builder: _ChunkBuilder, send: bool = True) -> None:
        builder.closed = True
        if builder is self._open:
            self._open = None
        if builder.live_steps == 0 and builder.pending_items == 0:
            self._release(builder, [])  # never sent, and nothing can reference it any more
            return
        if send and self._pending:
            self._send_ready()

    def _send_ready(self) -> None:
        chunks, items = [], []
        releases, self._releases = self._releases, []
        pending = self._pending
        while pending:
            table, priority, key, wire_columns, builders = pending[0]
            if not builders[0].closed or (len(builders) > 1 and not all(b.closed for b in builders)):
                break  # waits for its chunk to close (chunk_length set)
            pending.popleft()
            for b in builders:
                if not b.sent:
                    b.sent = True
                    chunks.append(self._encode_chunk(b))
                    b.steps = b.columns = None
            items.append((table, key, priority, wire_columns))
            for b in builders:
                b.pending_items -= 1
                if b.pending_items == 0 and b.live_steps == 0 and b is not self._open:
                    self._release(b, releases)
        if items or releases:
            self._stream.send(chunks, items, releases)

    def _encode_chunk(self, builder: _ChunkBuilder) -> ChunkRow:
        steps = builder.steps
        one_step = columns = None
        if builder.columns is not None:
            columns = builder.columns
        elif len(steps) == 1:
            one_step = steps[0]  # its columns are views (leaf[np.newaxis]), made only if encoded
        else:
            columns = [np.stack(leaves) for leaves in zip(*steps)]
        encoded = []
        nbytes = 0
        hints = self._compress_hints
        for leaf in range(len(one_step) if one_step is not None else len(columns)):
            hint = hints[leaf]
            if hint[0] > 0:
                hint[0] -= 1
                if one_step is not None and not self._delta:
                    data = encode_raw_step(one_step[leaf], self._leaf_dtype_strs[leaf])  # append checked it
                else:
                    column = columns[leaf] if one_step is None else one_step[leaf][np.newaxis]
                    data = encode_column(column, self._delta, compress=False)
            else:
                column = columns[leaf] if one_step is None else one_step[leaf][np.newaxis]
                data = encode_column(column, self._delta, compress=True)
                if data.compressed or column.nbytes < _ADAPTIVE_MIN_BYTES:
                    hint[1], hint[2] = 0, _INCOMPRESSIBLE_SKIP
                else:
                    hint[1] += 1
                    if hint[1] >= _INCOMPRESSIBLE_TRIES:
                        # the next failure (one try after the skip) skips again, twice as long
                        hint[0], hint[1] = hint[2], _INCOMPRESSIBLE_TRIES - 1
                        hint[2] = min(2 * hint[2], _INCOMPRESSIBLE_MAX_SKIP)
            encoded.append(data)
            nbytes += len(data.data)
        return tuple.__new__(ChunkRow, (builder.key, builder.episode_id, builder.start_index,
                                        1 if one_step is not None else len(columns[0]), encoded, nbytes))

    def _maybe_release(self, builder: _ChunkBuilder) -> None:
        if builder.pending_items == 0:
            self._release(builder, self._releases)

    def _send_releases(self) -> None:
        """Sends the deferred chunk releases that no item carried out."""
        if self._releases:
            releases, self._releases = self._releases, []
            self._stream.send((), (), releases)

    def _release(self, builder: _ChunkBuilder, releases: list) -> None:
        if builder.released:
            return
        builder.released = True
        if builder.sent:
            releases.append(builder.key)
        builder.steps = builder.columns = None

    # -- flushing and episodes -----------------------------------------------------------

    def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None) -> None:
        """Sends every created item (closing chunks they wait for) and blocks until at most
        `block_until_num_items` items are unacknowledged. On a timeout the items stay queued
        and are sent and inserted in the background.

        Args:
          block_until_num_items: how many items may stay unacknowledged.
          timeout_ms: how long to wait; None (or, as in Reverb, <= 0): no limit.

        Raises:
          InvalidArgumentError (a ValueError): block_until_num_items < 0.
          DeadlineExceededError: not within `timeout_ms`. Any error of the stream, e.g.
            UnavailableError when the server went away, NotFoundError for an unknown table,
            SignatureMismatchError for data that does not fit a table.
          CancelledError (a RuntimeError): the writer is closed.
        """
        if block_until_num_items < 0:
            raise errors.InvalidArgumentError(
                f"block_until_num_items must be >= 0, got {block_until_num_items}")
        self._check_open()
        self._close_referenced_chunks()
        timeout = None if timeout_ms is None or timeout_ms <= 0 else timeout_ms / 1000
        try:
            self._stream.wait(block_until_num_items, timeout)
        except errors.DeadlineExceededError as e:
            raise errors.DeadlineExceededError(
                f"Flush call did not complete within provided timeout of "
                f"{datetime.timedelta(milliseconds=timeout_ms)} ({e})") from None

    def _close_referenced_chunks(self) -> None:
        if self._open is not None and self._open.pending_items > 0:
            self._finalize(self._open)
        elif self._pending:
            self._send_ready()
        self._send_releases()

    def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Flushes (every item acknowledged) and starts a new episode: `episode_steps` is 0 and
        a new episode id is drawn. With `clear_buffers` the history is emptied (an open partial
        step with it) and later items cannot reference earlier steps; without it the history
        goes on (its indices keep counting from the earlier episode's start, an open partial
        step stays open and counts in the new episode once complete) and items may span both
        episodes.

        Args:
          clear_buffers: whether to empty the history.
          timeout_ms: how long to wait for the acknowledgements (None: no limit; 0: only those
            already there). On a timeout the episode does not end (as in Reverb's C++ writer):
            the items stay queued and a later call can end it.

        Raises:
          DeadlineExceededError: not within `timeout_ms`. Errors of the stream, as `flush`.
          CancelledError (a RuntimeError): the writer is closed.
        """
        self._check_open()
        self._close_referenced_chunks()
        try:
            self._stream.wait(0, None if timeout_ms is None else max(0, timeout_ms) / 1000)
        except errors.DeadlineExceededError as e:
            raise errors.DeadlineExceededError(
                f"End episode call did not complete within provided timeout of "
                f"{datetime.timedelta(milliseconds=timeout_ms)} ({e})") from None
        if clear_buffers:
            if self._open_row is not None:  # the open partial step goes with the history
                for builder in self._open_step_builders:
                    builder.live_steps -= 1
                    if builder.live_steps == 0 and builder is not self._open and builder.pending_items == 0:
                        self._release(builder, self._releases)
                self._open_row = self._open_row_builder = self._open_step_builders = None
                self._update_dense()
            for kept in set(self._window):
                for builder in (kept if type(kept) is tuple else (kept,)):
                    builder.live_steps = 0
                    if builder is not self._open and builder.pending_items == 0:
                        self._release(builder, self._releases)
            if self._open is not None:
                self._open.released = True
                self._open = None
            self._window.clear()
            for history in self._history:
                history.clear()
            self._history_count[0] = 0
        elif self._open is not None:
            self._finalize(self._open)  # the next episode's steps go into chunks of their own
        self._send_releases()
        self._episode_id = self._new_key()
        self._episode_step = 0

    def close(self, flush: bool = False, cancel: bool = False) -> None:
        """Ends the writer. Idempotent. Items already created are sent and the stream ends
        once the server acknowledged them (waiting at most a few seconds, then cancelling);
        errors of the stream are not raised. Reverb's close cancels the stream instead.

        Extensions: with `flush`, first waits (without a limit) for every item's
        acknowledgement and raises the stream's errors, as `flush`; with `cancel` (and no
        flush) the stream is cancelled at once: items not acknowledged yet may or may not have
        been inserted, and none is inserted later.
        """
        if self._closed:
            return
        if type(self._stream) is _StreamOnFirstUse and not self._pending:
            self._closed = True  # nothing was ever sent: there is no stream to end
            return
        try:
            if not cancel or flush:
                self._close_referenced_chunks()
            if flush:
                self._stream.wait(0, None)
        finally:
            self._closed = True
            self._stream.close(cancel=cancel and not flush)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.CancelledError("TrajectoryWriter::Close has been called.")

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, exc_type, exc, tb):
        # As Reverb's: flushes unless the block raised a replay error; then (an extension)
        # closes the stream.
        try:
            if exc_type is None or not issubclass(exc_type, errors.ReplayError):
                self.flush()
        finally:
            try:
                self.close()
            except errors.ReplayError:
                if exc_type is None:
                    raise

    def __del__(self):
        # As Reverb's writer does when it is destroyed: what was created is sent and acknowledged
        # first (within _DROPPED_WRITER_FLUSH_SECONDS here), so items created before the writer
        # went out of scope are in their tables once it is gone.
        if getattr(self, "_closed", True):
            return
        if type(self._stream) is _StreamOnFirstUse and not self._pending:
            self._closed = True
            return
        try:
            self._close_referenced_chunks()
            self._stream.wait(0, _DROPPED_WRITER_FLUSH_SECONDS)
        except BaseException:  # noqa: BLE001 - nowhere to report it from a finalizer
            pass
        try:
            self._closed = True
            self._stream.close(cancel=False)
        except BaseException:  # noqa: BLE001
            pass


class _StreamOnFirstUse:
    """Stands for a writer's InsertStream until first used, then makes it and puts it in the
    writer's place (so a writer built around anything with a `max_num_keep_alive_refs`, as
    Reverb's one-argument constructor allows, needs a client only once it writes)."""

    def __init__(self, writer: "weakref.ref", client, max_in_flight_items: int, timeout: Optional[float]):
        self.__dict__["_args"] = (writer, client, max_in_flight_items, timeout)

    def _real(self) -> InsertStream:
        writer, client, max_in_flight_items, timeout = self.__dict__["_args"]
        stream = InsertStream(client, max_in_flight_items, timeout=timeout)
        owner = writer()
        if owner is not None:
            owner._stream = stream  # noqa: SLF001 - the writer's own attribute
        self.__dict__["_stream"] = stream
        return stream

    def __getattr__(self, name: str):
        stream = self.__dict__.get("_stream") or self._real()
        return getattr(stream, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self.__dict__.get("_stream") or self._real(), name, value)


# -- helpers -------------------------------------------------------------------------------------


def _random_keys(rng: random.Random):
    """Random keys in [1, 2**63], made a thousand at a time (a writer takes two per item)."""
    getrandbits = rng.getrandbits
    while True:
        yield from [getrandbits(63) + 1 for _ in range(1024)]
