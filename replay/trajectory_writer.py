"""TrajectoryWriter: writes steps to a replay server and builds items from any kept-alive cells.

This is how rollout workers put experience into the replay service (Reverb's
TrajectoryWriter). Each `append` adds one step (a nest of arrays) and returns a reference per
leaf; `history` exposes the last `num_keep_alive_refs` steps column by column, so an item can
be any slice of them (`writer.history['obs'][-3:]`), for any table, overlapping other items.
Steps are grouped into chunks (column-wise, lz4-compressed, see `replay.chunks`); every chunk
is sent once, with the first item that needs it, however many items and tables reference it.

Sending is asynchronous (`replay.insert_stream.InsertStream`): items and chunks go into a
queue that a gRPC request iterator drains, many per message, while a background thread counts
the server's batched acks. A call blocks only when the stream's window of unacknowledged items
(at most `max_in_flight_items`) or bytes is full; the window falls to a few items while a
table's rate limiter holds the writer's inserts back, so the writer waits in `append` and
`create_item` instead of running ahead of the limiter. `flush` waits for acks. If the stream
fails (bad item, server gone), the next call raises the error.

Chunking: with `chunk_length=None` a chunk is closed as soon as an item references one of its
steps (items go out immediately, chunks hold the steps since the previous chunk). With a
`chunk_length`, chunks are closed every `chunk_length` steps (better compression) and items
referencing the open chunk wait until it closes, at `flush` or at `end_episode`. Columns are
lz4-compressed, except that a leaf whose data stopped compressing (random or pre-compressed
data) is stored raw for a while before lz4 is tried again.
"""
from __future__ import annotations

import collections
import os
import random
import weakref
from typing import Any, Deque, List, Optional, Sequence, Tuple

import numpy as np
import tree

from replay import errors, validation
from replay.chunks import encode_column, encode_raw_step
from replay.codec import ChunkRow
from replay.insert_stream import InsertStream
from replay.items import TrajectoryColumn

# Adaptive compression: after this many chunks in a row where lz4 did not shrink a leaf's column
# (random or already-compressed data), that leaf is stored raw for the next _INCOMPRESSIBLE_SKIP
# chunks, then lz4 is tried once more; each further failure doubles the skip, up to
# _INCOMPRESSIBLE_MAX_SKIP chunks, and one success starts over. The backoff matters for small
# steps: lz4 releases the GIL, and handing it to the stream's thread and back costs more than
# the compression itself.
_INCOMPRESSIBLE_TRIES = 8
_INCOMPRESSIBLE_SKIP = 64
_INCOMPRESSIBLE_MAX_SKIP = 1024
_ADAPTIVE_MIN_BYTES = 64
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


class CellRef:
    """A reference to one leaf of one appended step (Reverb's CellRef). Used as a leaf of an
    item's trajectory, it gives a column without a time dimension. It keeps the leaf's value
    (`numpy()`) and knows whether its step left the writer's keep-alive window (`expired`)."""

    __slots__ = ("_builder", "offset", "leaf", "shape", "dtype", "value")

    def __init__(self, builder, offset: int, leaf: int, shape, dtype, value=None):
        self._builder = builder
        self.offset = offset
        self.leaf = leaf
        self.shape = shape
        self.dtype = dtype
        self.value = value

    @property
    def episode_id(self) -> int:
        return self._builder.episode_id

    @property
    def step(self) -> int:
        """The step's index in its episode."""
        return self._builder.start_index + self.offset

    @property
    def expired(self) -> bool:
        """Whether items can no longer reference this cell (its step left the keep-alive window,
        or its episode ended with its buffers cleared)."""
        writer = self._builder.writer()
        return writer is None or not writer._kept_alive(self)  # noqa: SLF001 - same module

    def numpy(self) -> np.ndarray:
        """The leaf's value, as appended."""
        return self.value

    def __repr__(self) -> str:
        return f"CellRef(episode={self.episode_id}, step={self.step}, leaf={self.leaf})"


class ColumnRefs:
    """Consecutive or arbitrary cells of one column (Reverb's TrajectoryColumn). Used as a leaf
    of an item's trajectory, it gives a column with a leading time dimension of len(cells)."""

    __slots__ = ("cells",)

    def __init__(self, cells: Sequence[CellRef]):
        self.cells = tuple(cells)

    def __len__(self) -> int:
        return len(self.cells)

    @property
    def shape(self):
        return (len(self.cells),) + tuple(self.cells[0].shape) if self.cells else (0,)

    def __repr__(self) -> str:
        return f"ColumnRefs({len(self.cells)} cells)"


class ColumnHistory:
    """The kept-alive cells of one leaf, oldest first; index or slice it like a list."""

    __slots__ = ("_cells",)

    def __init__(self, cells: Deque[CellRef]):
        self._cells = cells

    def __len__(self) -> int:
        return len(self._cells)

    def __getitem__(self, index):
        """An int gives a CellRef, a slice gives ColumnRefs.

        Raises:
          InvalidArgumentError: the index lies outside the kept-alive steps, or the slice is empty.
        """
        if type(index) is int:
            try:
                return self._cells[index]  # a deque: O(1) at either end
            except IndexError:
                raise errors.InvalidArgumentError(
                    f"history index {index} is outside the {len(self._cells)} kept-alive steps; raise "
                    "num_keep_alive_refs to reference older steps") from None
        cells = list(self._cells)
        if isinstance(index, slice):
            picked = cells[index]
            if not picked:
                raise errors.InvalidArgumentError(
                    f"history slice {index} selects no steps (the writer keeps {len(cells)} steps)")
            return ColumnRefs(picked)
        try:
            return cells[index]
        except IndexError:
            raise errors.InvalidArgumentError(
                f"history index {index} is outside the {len(cells)} kept-alive steps; raise "
                "num_keep_alive_refs to reference older steps") from None


class _ChunkBuilder:
    """The steps of one chunk being written, then what the writer knows of it once sent (its
    key, whether items may still reference it) until it is released."""

    __slots__ = ("key", "writer", "episode_id", "start_index", "start_serial", "steps", "columns",
                 "closed", "sent", "released", "pending_items", "live_steps")

    def __init__(self, key: int, writer: "weakref.ref", episode_id: int, start_index: int,
                 start_serial: int):
        self.key = key
        self.writer = writer  # weak: the writer holds its builders
        self.episode_id = episode_id
        self.start_index = start_index  # the first step's index in its episode
        self.start_serial = start_serial  # ... and among all steps of the writer
        self.steps: Optional[List[list]] = []
        # or, for the steps of `append_step_items`, one array per leaf holding all of them
        self.columns: Optional[List[np.ndarray]] = None
        self.closed = False  # no more steps; the chunk is encoded when first sent
        self.sent = False
        self.released = False
        self.pending_items = 0  # created items referencing it that were not sent yet
        self.live_steps = 0  # its steps still inside the keep-alive window


class TrajectoryWriter:
    """Writes steps and items over one InsertStream (see the module docstring).

    Args:
      client: the `Client`.
      num_keep_alive_refs: how many of the latest steps items may reference.
      chunk_length: steps per chunk; None closes a chunk when an item references it.
      delta_encoded: delta-encode integer columns of rank >= 1 per step along time.
      max_in_flight_items: the most unacknowledged items before calls block. None (the
        default): sized from the first step, as many as 4 MB of such steps, 1,000 to 16,000
        items. The stream's window stays within it and within 16 MB of chunk bytes, and is
        smaller while rate limiters hold inserts back (see `replay.insert_stream`).
      call_timeout: seconds the writer's stream may last (its gRPC deadline; None: no limit).
        For one-shot writes such as `Client.insert`: when it passes, the stream fails with
        DeadlineExceededError and the server cancels inserts it has not made yet.

    Raises:
      InvalidArgumentError: non-positive num_keep_alive_refs, chunk_length or max_in_flight_items.
    """

    def __init__(self, client, num_keep_alive_refs: int, chunk_length: Optional[int] = None,
                 delta_encoded: bool = False, max_in_flight_items: Optional[int] = None,
                 call_timeout: Optional[float] = None):
        if num_keep_alive_refs <= 0:
            raise errors.InvalidArgumentError(
                f"num_keep_alive_refs must be positive, got {num_keep_alive_refs}")
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
        self._stream = InsertStream(client, max_in_flight_items or _MIN_AUTO_IN_FLIGHT_ITEMS,
                                    timeout=call_timeout)
        self._rng = random.Random(os.urandom(16))
        self._keys = _random_keys(self._rng)  # (not a method: the generator would hold self)
        self._weak_self = weakref.ref(self)
        self._structure = None
        self._dict_keys: Optional[List[Any]] = None
        self._first_key_order: Optional[List[Any]] = None
        self._leaf_specs: Optional[List[Tuple[tuple, np.dtype]]] = None
        self._leaf_dtype_strs: List[Optional[str]] = []
        self._history: List[Deque[CellRef]] = []
        self._history_nest = None  # what `history` returns
        self._window: Deque[_ChunkBuilder] = collections.deque()  # one entry per kept step
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

    # -- steps ---------------------------------------------------------------------------

    @property
    def episode_steps(self) -> int:
        """Steps appended in the current episode."""
        return self._episode_step

    @property
    def max_num_keep_alive_refs(self) -> int:
        """How many of the latest steps items may reference (Reverb's name)."""
        return self._keep

    @property
    def max_in_flight_items(self) -> int:
        return self._stream.max_in_flight_items

    @property
    def num_unacked_items(self) -> int:
        """Items sent (or queued) that the server has not acknowledged yet."""
        return self._stream.num_unacked

    def append(self, data: Any) -> Any:
        """Appends one step (a nest of arrays; the first step fixes structure, dtypes and shapes).

        Returns the step's nest of `CellRef`s.

        Raises:
          InvalidArgumentError: the structure, a dtype or a shape differs from the first step, a
            leaf holds Python objects, or the writer is closed; errors of the stream (see `flush`).
        """
        if self._closed:
            self._check_open()
        specs = self._leaf_specs
        if specs is None:
            leaves = [np.asarray(x) for x in tree.flatten(data)]
            self._set_structure(data, leaves)
            specs = self._leaf_specs
        elif type(data) is np.ndarray and self._structure is None:  # a one-array step
            leaves = [data]
            shape, dtype = specs[0]
            # `is` first: arrays of one builtin dtype share its object, and == costs more
            if data.shape != shape or (data.dtype is not dtype and data.dtype != dtype
                                       and not _both_strings(data.dtype, dtype)):
                _raise_spec_mismatch(0, data, shape, dtype)
        else:
            leaves = self._step_leaves(data)
            for i, (leaf, (shape, dtype)) in enumerate(zip(leaves, specs)):
                if leaf.shape != shape or (leaf.dtype is not dtype and leaf.dtype != dtype
                                           and not _both_strings(leaf.dtype, dtype)):
                    _raise_spec_mismatch(i, leaf, shape, dtype)
        builder = self._open
        if builder is None:
            builder = self._open = _ChunkBuilder(self._new_key(), self._weak_self, self._episode_id,
                                                 self._episode_step, self._serial)
        offset = len(builder.steps)
        builder.steps.append(leaves)
        if len(leaves) == 1:  # (the zips below cost more than the rest of a one-leaf step)
            shape, dtype = specs[0]
            refs = [CellRef(builder, offset, 0, shape, dtype, leaves[0])]
            self._history[0].append(refs[0])
        else:
            refs = [CellRef(builder, offset, i, shape, dtype, leaf)
                    for i, ((shape, dtype), leaf) in enumerate(zip(specs, leaves))]
            for history, ref in zip(self._history, refs):
                history.append(ref)
        self._episode_step += 1
        self._serial += 1
        window = self._window
        builder.live_steps += 1
        window.append(builder)
        if len(window) > self._keep:
            old = window.popleft()
            old.live_steps -= 1
            if old.live_steps == 0 and old is not self._open:
                self._maybe_release(old)
        # Without a chunk_length, chunks still close every num_keep_alive_refs steps, so steps
        # no item references are dropped instead of piling up in an open chunk.
        if len(builder.steps) >= (self._chunk_length or self._keep):
            self._finalize(builder)
        return refs[0] if self._structure is None else self._refs_nest(data, refs)

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
            priorities, or a closed writer; errors of the stream (see `flush`).
        """
        self._check_open()
        flat = tree.flatten(steps)
        leaves = [np.asarray(x) for x in flat]
        if not leaves or any(leaf.ndim == 0 for leaf in leaves):
            raise errors.InvalidArgumentError(
                "append_step_items needs leaves with a leading dimension of steps")
        n = leaves[0].shape[0]
        if any(leaf.shape[0] != n for leaf in leaves):
            raise errors.InvalidArgumentError(
                f"the leaves hold different numbers of steps {[leaf.shape[0] for leaf in leaves]}; "
                "every leaf needs one row per step")
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
        if self._leaf_specs is None:
            self._set_structure(first_step, [leaf[0] for leaf in leaves])
        else:
            self._step_leaves(first_step)  # the structure check
            for i, (leaf, (shape, dtype)) in enumerate(zip(leaves, self._leaf_specs)):
                if leaf.shape[1:] != shape or leaf.dtype != dtype:
                    raise errors.InvalidArgumentError(
                        f"leaf {i} has rows of shape {leaf.shape[1:]} and dtype {leaf.dtype}, but "
                        f"the first step had {shape} and {dtype}; every step of a writer has the "
                        "same specs")
        if self._open is not None:
            self._finalize(self._open, send=False)
        specs = self._leaf_specs
        num_leaves = len(specs)
        per_chunk = self._chunk_length or 1
        keep = self._keep
        window, histories = self._window, self._history
        first_kept = n - min(keep, n)
        for start in range(0, n, per_chunk):
            end = min(n, start + per_chunk)
            builder = _ChunkBuilder(self._new_key(), self._weak_self, self._episode_id,
                                    self._episode_step + start, self._serial + start)
            builder.steps = None
            builder.columns = [leaf[start:end] for leaf in leaves]
            builder.closed = True
            builder.pending_items = end - start
            chunk_key = builder.key
            builders = [builder]
            for offset in range(end - start):
                wire_columns = [(True, ((chunk_key, offset, 1, leaf),)) for leaf in range(num_leaves)]
                self._pending.append((table, float(priorities[start + offset]), self._new_key(),
                                      wire_columns, builders))
            for t in range(max(start, first_kept), end):
                builder.live_steps += 1
                window.append(builder)
                for i, history in enumerate(histories):
                    history.append(CellRef(builder, t - start, i, specs[i][0], specs[i][1],
                                           leaves[i][t]))
                if len(window) > keep:
                    old = window.popleft()
                    old.live_steps -= 1
                    if old.live_steps == 0 and old is not self._open:
                        self._maybe_release(old)
        self._episode_step += n
        self._serial += n
        self._send_ready()

    def _step_leaves(self, data) -> List[np.ndarray]:
        """The leaves of a later step as arrays, checked against the first step's structure.

        Steps that are a plain dict of arrays with the first step's keys, or a single array,
        skip dm-tree (the per-step cost that matters when every step is written); anything else
        goes through the general structure check.

        Raises:
          InvalidArgumentError: the structure differs from the first step's.
        """
        keys = self._dict_keys
        if keys is not None and type(data) is dict and len(data) == len(keys):
            try:
                values = [data[k] for k in keys]
            except KeyError:
                values = None
            if values is not None and all(type(v) in _PLAIN_LEAF_TYPES for v in values):
                return [np.asarray(v) for v in values]
        elif self._structure is None and type(data) in _PLAIN_LEAF_TYPES:
            return [np.asarray(data)]
        flat = tree.flatten(data)
        if len(flat) != len(self._leaf_specs) or (self._structure is not None and not _same_structure(
                self._structure, data)):
            raise errors.InvalidArgumentError(
                f"the step's structure ({len(flat)} leaves) differs from the first step's "
                f"({len(self._leaf_specs)} leaves); every step of a writer has the same structure")
        return [np.asarray(x) for x in flat]

    def _refs_nest(self, data, refs: List[CellRef]) -> Any:
        """The step's CellRefs in the structure of `data` (as dm-tree's unflatten_as would)."""
        if self._structure is None:
            return refs[0]
        keys = self._dict_keys
        if keys is not None:  # this step passed the flat dict checks of _step_leaves
            by_key = dict(zip(keys, refs))
            if self._first_key_order is None:
                return by_key  # the first step's keys were in sorted order
            return {k: by_key[k] for k in self._first_key_order}
        return tree.unflatten_as(self._structure, refs)

    def _set_structure(self, data, leaves) -> None:
        for i, leaf in enumerate(leaves):
            if leaf.dtype.hasobject:
                raise errors.InvalidArgumentError(
                    f"leaf {i} holds Python objects (dtype object); use numeric or fixed-width string arrays")
        self._structure = None if not tree.is_nested(data) else data
        # A flat dict of plain leaves (what rollout workers write) gets the fast paths of
        # _step_leaves and _refs_nest; tree.flatten orders a dict's leaves by sorted key.
        # (dm-tree's unflatten_as gives the first step's key order, and so does _refs_nest.)
        self._dict_keys = self._first_key_order = None
        if type(data) is dict and data and all(type(v) in _PLAIN_LEAF_TYPES for v in data.values()):
            try:
                self._dict_keys = sorted(data)
            except TypeError:
                pass  # keys of mixed types: leave them to dm-tree
            if self._dict_keys is not None and list(data) != self._dict_keys:
                self._first_key_order = list(data)
        self._leaf_specs = [(leaf.shape, leaf.dtype) for leaf in leaves]
        # (None for strings: steps of a string leaf may differ in width, see _both_strings)
        self._leaf_dtype_strs = [None if leaf.dtype.kind in "SU" else leaf.dtype.str for leaf in leaves]
        if self._auto_in_flight:
            step_bytes = sum(leaf.nbytes for leaf in leaves)
            self._stream.max_in_flight_items = min(
                _MAX_AUTO_IN_FLIGHT_ITEMS,
                max(_MIN_AUTO_IN_FLIGHT_ITEMS, _AUTO_IN_FLIGHT_BYTES // max(step_bytes, 1)))
        self._history = [collections.deque(maxlen=self._keep) for _ in leaves]
        self._history_nest = None
        # per leaf: chunks left to skip, failed tries in a row, the next skip's length
        self._compress_hints = [[0, 0, _INCOMPRESSIBLE_SKIP] for _ in leaves]

    @property
    def history(self) -> Any:
        """The kept-alive steps as a nest (the steps' structure) of `ColumnHistory`.

        Raises:
          InvalidArgumentError: nothing was appended yet.
        """
        if self._leaf_specs is None:
            raise errors.InvalidArgumentError("the writer has no history yet; append a step first")
        nest = self._history_nest
        if nest is None:  # views of the deques, which change in place: built once
            columns = [ColumnHistory(h) for h in self._history]
            nest = self._history_nest = (columns[0] if self._structure is None
                                         else tree.unflatten_as(self._structure, columns))
        return nest

    # -- items ---------------------------------------------------------------------------

    def create_item(self, table: str, priority: float, trajectory: Any) -> None:
        """Creates an item for `table` whose columns are the leaves of `trajectory`: each a
        `CellRef` (one step, no time dimension) or `ColumnRefs` (from slicing `history`).

        Raises:
          InvalidArgumentError: a bad priority, a leaf that is not a reference, or a reference to
            a step no longer kept alive (or of an earlier episode); errors of the stream.
        """
        if self._closed:
            self._check_open()
        priority = float(priority)
        key = self._new_key()
        validation.check_priority(key, priority)
        leaf_type = type(trajectory)
        if leaf_type is CellRef and self._kept_alive(trajectory):
            # `_add_item` for one kept-alive cell (a one-leaf step item), without its loops
            builder = trajectory._builder  # noqa: SLF001 - CellRef belongs to this module
            if self._chunk_length is None and builder is self._open:
                self._finalize(builder, send=False)
            builder.pending_items += 1
            self._pending.append((table, priority, key,
                                  [(True, ((builder.key, trajectory.offset, 1, trajectory.leaf),))],
                                  (builder,)))
            self._send_ready()
            return
        columns = []
        # A lone reference (a one-leaf step) needs no structure walk.
        leaves = (trajectory,) if leaf_type is CellRef or leaf_type is ColumnRefs else tree.flatten(trajectory)
        for leaf in leaves:
            if isinstance(leaf, CellRef):
                columns.append(((leaf,), True))
            elif isinstance(leaf, ColumnRefs):
                if not leaf.cells:
                    raise errors.InvalidArgumentError("an item column references no steps")
                columns.append((leaf.cells, False))
            else:
                raise errors.InvalidArgumentError(
                    f"trajectory leaves must be CellRef or ColumnRefs (from append or history), got "
                    f"{type(leaf).__name__}")
        if not columns:
            raise errors.InvalidArgumentError("the trajectory has no columns")
        self._add_item(table, priority, key, columns)

    def create_item_from_last_steps(self, table: str, priority: float, num_steps: int) -> None:
        """Creates an item of every leaf's last `num_steps` steps (with a time dimension), as
        `create_item` with `history[leaf][-num_steps:]` for each leaf, without building the
        references (the legacy `Writer`'s path). The caller checks that `num_steps` steps of
        this episode are kept alive.

        Raises:
          InvalidArgumentError: a bad priority, or the writer is closed;
          any error the stream failed with.
        """
        self._check_open()
        priority = float(priority)
        key = self._new_key()
        validation.check_priority(key, priority)
        columns = []
        for history in self._history:
            cells = tuple(history)[-num_steps:] if num_steps != 1 else (history[-1],)
            columns.append((cells, False))
        self._add_item(table, priority, key, columns)

    def _add_item(self, table: str, priority: float, key: int, columns: list) -> None:
        builders = []
        for cells, _ in columns:
            for cell in cells:
                builder = cell._builder  # noqa: SLF001 - CellRef belongs to this module
                if not self._kept_alive(cell):
                    raise errors.InvalidArgumentError(
                        f"the trajectory references step {cell.step} of "
                        f"{'an earlier episode' if builder.episode_id != self._episode_id else 'this episode'}"
                        f", which is no longer kept alive (the writer keeps the last {self._keep} steps); "
                        "raise num_keep_alive_refs")
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
        for leaf in range(len(hints)):
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

    def flush(self, block_until_num_items: int = 0, timeout: Optional[float] = None) -> None:
        """Sends every created item (closing chunks they wait for) and blocks until at most
        `block_until_num_items` items are unacknowledged.

        Raises:
          DeadlineExceededError: not within `timeout` seconds (items stay queued); any error of the
            stream, e.g. UnavailableError when the server went away, NotFoundError for an unknown
            table, SignatureMismatchError for data that does not fit a table.
        """
        self._check_open()
        self._close_referenced_chunks()
        self._stream.wait(block_until_num_items, timeout)

    def _close_referenced_chunks(self) -> None:
        if self._open is not None and self._open.pending_items > 0:
            self._finalize(self._open)
        elif self._pending:
            self._send_ready()
        self._send_releases()

    def end_episode(self, clear_buffers: bool = True, timeout: Optional[float] = None) -> None:
        """Ends the episode: sends pending items, waits for their acks and starts a new episode
        id. With `clear_buffers` every kept chunk is released, so later items cannot reference
        earlier steps; without it the open chunk is closed (chunks hold steps of one episode) and
        the kept-alive steps stay referenceable, as in Reverb.

        Raises: as `flush`.
        """
        self._check_open()
        self._close_referenced_chunks()
        if clear_buffers:
            for builder in set(self._window):
                builder.live_steps = 0
                if builder is not self._open and builder.pending_items == 0:
                    self._release(builder, self._releases)
            if self._open is not None:
                self._open.released = True
                self._open = None
            self._window.clear()
            for history in self._history:
                history.clear()
        elif self._open is not None:
            self._finalize(self._open)  # the next episode's steps go into chunks of their own
        self._send_releases()
        self._episode_id = self._new_key()
        self._episode_step = 0
        self._stream.wait(0, timeout)

    def close(self, flush: bool = True, cancel: bool = False) -> None:
        """Flushes (unless `flush` is False) and ends the stream. Idempotent. With `cancel` (and
        no flush), the stream is cancelled at once: items not acknowledged yet may or may not
        have been inserted, and none is inserted later.

        Raises: as `flush` (the stream is closed either way).
        """
        if self._closed:
            return
        try:
            if flush:
                self._close_referenced_chunks()
                self._stream.wait(0, None)
        finally:
            self._closed = True
            self._stream.close(cancel=cancel and not flush)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.InvalidArgumentError("the writer is closed; create a new one")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            try:
                self.close(flush=False)
            except errors.ReplayError:
                pass  # the original exception is the one to see


def _random_keys(rng: random.Random):
    """Random keys in [1, 2**63], made a thousand at a time (a writer takes two per item)."""
    getrandbits = rng.getrandbits
    while True:
        yield from [getrandbits(63) + 1 for _ in range(1024)]


def _raise_spec_mismatch(index: int, leaf: np.ndarray, shape, dtype) -> None:
    raise errors.InvalidArgumentError(
        f"leaf {index} of the step has shape {leaf.shape} and dtype {leaf.dtype}, but the first "
        f"step had {shape} and {dtype}; every step of a writer has the same specs")


def _both_strings(a: np.dtype, b: np.dtype) -> bool:
    """Two fixed-width string dtypes of one kind (bytes or str), of any widths: a string leaf is
    TensorFlow's tf.string, whose steps differ in length (a chunk's column takes the widest)."""
    return a.kind == b.kind and a.kind in "SU"


def _same_structure(a, b) -> bool:
    try:
        tree.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return False
    return True


def _item_columns(columns) -> List[TrajectoryColumn]:
    """Wire item columns from cell tuples: runs of consecutive cells of one chunk become one
    slice."""
    out = []
    for cells, squeeze in columns:
        if len(cells) == 1:  # the common step item: one cell per column
            cell = cells[0]
            out.append((squeeze, ((cell._builder.key, cell.offset, 1, cell.leaf),)))  # noqa: SLF001
            continue
        slices = []
        run_builder, run_offset, run_length, run_leaf = None, 0, 0, 0
        for cell in cells:
            builder = cell._builder  # noqa: SLF001 - CellRef belongs to this module
            if (builder is run_builder and cell.leaf == run_leaf
                    and cell.offset == run_offset + run_length):
                run_length += 1
                continue
            if run_builder is not None:
                slices.append((run_builder.key, run_offset, run_length, run_leaf))
            run_builder, run_offset, run_length, run_leaf = builder, cell.offset, 1, cell.leaf
        slices.append((run_builder.key, run_offset, run_length, run_leaf))
        out.append((squeeze, tuple(slices)))
    return out
