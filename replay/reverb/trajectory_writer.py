"""Reverb's `TrajectoryWriter` and `TrajectoryColumn` (`replay.reverb`) over the service's writer.

The service's `replay.trajectory_writer.TrajectoryWriter` does the chunking, sending and acks;
this module adds what Reverb's Python writer has on top: steps whose leaves may be missing
(None) or arrive in several `append(..., partial_step=True)` calls, a history whose cells
remember their values (`TrajectoryColumn.numpy()`), and `squeeze=` columns.

The native writer is given each step as a flat list of leaves in this writer's column order; a
missing leaf is stored as zeros there and is None in the history, so no item can reference it.
The set of columns is fixed by the first step (later steps may leave columns out, not add new
ones); flushing timeouts are in milliseconds, as in Reverb.
"""
from __future__ import annotations

import collections
from typing import Any, Deque, Iterator, List, Optional, Sequence

import numpy as np
import tree

from replay import errors, specs
from replay import trajectory_writer as native


# A writer dropped without close() waits at most this long for its items' acks (Reverb waits
# without a limit).
_DROPPED_WRITER_FLUSH_SECONDS = 30.0

# Reverb's CellRef is the service writer's: it keeps the leaf's value (`numpy()`) and knows
# whether it left the keep-alive window (`expired`).
CellRef = native.CellRef


def _none_reference_error() -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        "TrajectoryColumns cannot contain any None references (the leaf was missing in that "
        "step; slice the history where the column has values)")


class TrajectoryColumn:
    """A column of an item: cells of one leaf (from `TrajectoryWriter.history`), with a time
    dimension unless `squeeze` (which needs exactly one cell).

    Raises (constructor):
      InvalidArgumentError (a ValueError): a None cell (a step where the leaf was missing), or
      `squeeze` with other than one cell.
    """

    __slots__ = ("_refs", "is_squeezed", "path")

    def __init__(self, data_references: Sequence[CellRef], *, squeeze: bool = False, path=None):
        refs = tuple(data_references)
        for ref in refs:
            if ref is None:
                raise _none_reference_error()
        if squeeze and len(refs) != 1:
            raise errors.InvalidArgumentError(
                f"a squeezed column must have exactly one cell, got {len(refs)}")
        self._refs = refs
        self.is_squeezed = bool(squeeze)
        self.path = path

    def __len__(self) -> int:
        return len(self._refs)

    def __iter__(self) -> Iterator[CellRef]:
        return iter(self._refs)

    @classmethod
    def _of_cell(cls, cell: Optional[CellRef], path) -> "TrajectoryColumn":
        """`TrajectoryColumn([cell], squeeze=True, path=path)` without the general checks (the
        per-step item of a writer)."""
        if cell is None:
            raise _none_reference_error()
        column = cls.__new__(cls)
        column._refs = (cell,)  # noqa: SLF001 - its own class
        column.is_squeezed = True
        column.path = path
        return column

    def __getitem__(self, val) -> "TrajectoryColumn":
        if isinstance(val, int):
            return TrajectoryColumn([self._refs[val]], squeeze=True, path=self.path)
        if isinstance(val, slice):
            return TrajectoryColumn(self._refs[val], path=self.path)
        raise TypeError(f"TrajectoryColumn indices must be int or slice, not {type(val).__name__}")

    @property
    def shape(self):
        if not self._refs:
            return (0,)
        if self.is_squeezed:
            return tuple(self._refs[0].shape)
        return (len(self._refs),) + tuple(self._refs[0].shape)

    @property
    def dtype(self) -> np.dtype:
        return self._refs[0].dtype

    def numpy(self) -> np.ndarray:
        """The column's values (stacked along time unless squeezed).

        Raises:
          InvalidArgumentError: a cell's step left the keep-alive window.
        """
        if any(ref.expired for ref in self._refs):
            raise errors.InvalidArgumentError(
                "Cannot decode a TrajectoryColumn whose cells are expired (out of the keep-alive window)")
        if self.is_squeezed:
            return self._refs[0].value
        return np.stack([ref.value for ref in self._refs]) if self._refs else np.zeros((0,))

    def native(self):
        """The column as the service writer takes it."""
        if self.is_squeezed:
            return self._refs[0]
        return native.ColumnRefs(self._refs)

    def __repr__(self) -> str:
        return f"TrajectoryColumn(shape={self.shape}, squeeze={self.is_squeezed})"


class _ColumnHistory:
    """The kept-alive cells of one leaf (None where the leaf was missing), oldest first."""

    def __init__(self, path, cells: Deque[Optional[CellRef]]):
        self._path = path
        self._cells = cells

    @property
    def path(self):
        return self._path

    def __len__(self) -> int:
        return len(self._cells)

    def __iter__(self):
        return iter(list(self._cells))

    def __getitem__(self, val) -> TrajectoryColumn:
        if isinstance(val, int):
            try:
                cell = self._cells[val]
            except IndexError:
                raise IndexError(
                    f"history index {val} is outside the {len(self._cells)} kept-alive steps") from None
            return TrajectoryColumn._of_cell(cell, self._path)  # noqa: SLF001 - same module
        cells = list(self._cells)
        if isinstance(val, slice):
            if val.step is not None and val.step <= 0:
                raise errors.InvalidArgumentError("history slices need a positive step")
            return TrajectoryColumn(cells[val], path=self._path)
        if isinstance(val, (list, tuple)):
            return TrajectoryColumn([cells[i] for i in val], path=self._path)
        raise TypeError(f"history indices must be int, slice or a list of ints, not {type(val).__name__}")

    def __repr__(self) -> str:
        return f"ColumnHistory(path={self._path}, {len(self._cells)} steps)"


def _merge_dicts(first: Any, second: Any) -> Any:
    """`second` laid over `first` where both are dicts (recursively); otherwise whichever is
    given, `second` first."""
    if isinstance(first, dict) and isinstance(second, dict):
        merged = dict(first)
        for key, value in second.items():
            merged[key] = _merge_dicts(first[key], value) if key in first else value
        return merged
    return second if second is not None else first


class TrajectoryWriter:
    """Writes steps and builds items from any kept-alive cells (Reverb's TrajectoryWriter).

    Create it with `Client.trajectory_writer(num_keep_alive_refs)`. As Reverb's Python writer
    wraps its C++ writer, this one wraps the service's `replay.trajectory_writer.TrajectoryWriter`
    (`internal_writer`), which chunks, sends and counts acks; this layer keeps Reverb's
    history, column checks and partial steps.
    """

    def __init__(self, internal_writer: native.TrajectoryWriter):
        self._writer = internal_writer
        self._keep = int(internal_writer.max_num_keep_alive_refs)
        self._structure = None
        self._paths: List[tuple] = []
        self._specs: List[tuple] = []
        self._history: List[Deque[Optional[CellRef]]] = []
        self._history_view: Any = None
        self._partial: Optional[dict] = None  # path -> value of the step being built
        self._partial_nest: Any = None  # its parts merged, while the first step is built
        self._single_leaf = False  # the steps are one array, not a nest
        self._closed = False

    def __enter__(self) -> "TrajectoryWriter":
        return self

    def __exit__(self, exc_type, exc_value, exc_traceback):
        if exc_type is None:
            self.flush()
        self.close()

    @property
    def episode_steps(self) -> int:
        """Completed steps appended in the current episode."""
        return self._writer.episode_steps

    @property
    def history(self):
        """The kept-alive steps: a nest (the steps' structure) of column histories.

        Raises:
          InvalidArgumentError: nothing was appended yet.
        """
        if self._history_view is None:
            raise errors.InvalidArgumentError("the writer has no history yet; append a step first")
        return self._history_view

    def configure(self, path, *, num_keep_alive_refs: int, max_chunk_length: Optional[int]) -> None:
        """Accepted for Reverb's API; the service writer chunks all columns together, so the
        per-column settings have no effect beyond validation.

        Raises:
          InvalidArgumentError: non-positive values, or max_chunk_length > num_keep_alive_refs.
        """
        if num_keep_alive_refs < 1 or (max_chunk_length is not None and not
                                       1 <= max_chunk_length <= num_keep_alive_refs):
            raise errors.InvalidArgumentError(
                f"configure({path}): need num_keep_alive_refs >= 1 and 1 <= max_chunk_length <= "
                f"num_keep_alive_refs, got {num_keep_alive_refs} and {max_chunk_length}")

    def _define_columns(self, data) -> None:
        self._structure = data
        self._single_leaf = not tree.is_nested(data)
        flat = tree.flatten_with_path(data)
        self._paths = [path for path, _ in flat]
        self._specs = []
        for path, leaf in flat:
            if leaf is None:
                raise errors.InvalidArgumentError(
                    f"the first step has no value at {path}; the first step defines every column")
            value = np.asarray(leaf)
            self._specs.append((value.shape, value.dtype))
        self._history = [collections.deque(maxlen=self._keep) for _ in self._paths]
        # The view wraps the deques, which only ever change in place, so it is built once.
        if self._single_leaf:
            self._history_view = _ColumnHistory(self._paths[0], self._history[0])
        else:
            self._history_view = tree.unflatten_as(
                data, [_ColumnHistory(path, h) for path, h in zip(self._paths, self._history)])

    def append(self, data: Any, *, partial_step: bool = False):
        """Appends a step (a nest of arrays; a None leaf leaves that column out of this step).
        With `partial_step`, the step stays open and later calls add leaves to it; the step is
        written when a call without `partial_step` completes it. Returns the step's references
        (None for missing leaves) once the step is complete, else None.

        Raises:
          InvalidArgumentError (a ValueError): a leaf given twice in one step, a new column after
          the first step, or a dtype or shape differing from the column's.
        """
        if self._closed:
            self._check_open()
        if self._partial is None and not partial_step and self._structure is not None:
            # A whole step goes to the service writer as given; it checks structure, dtypes and
            # shapes. What it refuses (missing leaves among them) takes the general path below,
            # which accepts it or says, in Reverb's words, what is wrong.
            try:
                refs = self._writer.append(data)
            except errors.InvalidArgumentError:
                pass
            else:
                if self._single_leaf:
                    self._history[0].append(refs)
                else:
                    for mine, kept in zip(self._history, self._writer._history):  # noqa: SLF001
                        mine.append(kept[-1])
                return refs
        flat = dict(tree.flatten_with_path(data)) if data is not None else {}
        nest = data
        if self._partial is not None and self._structure is None:
            # the first step, given in parts: its parts' dicts together define the columns
            nest = _merge_dicts(self._partial_nest, data)
        if self._partial is not None:
            for path, value in flat.items():
                if value is not None and self._partial.get(path) is not None:
                    raise errors.InvalidArgumentError(
                        f"Field {path} has already been set in the active step.")
            merged = dict(self._partial)
            merged.update({p: v for p, v in flat.items() if v is not None})
            flat = merged
        if partial_step:
            self._partial = flat
            self._partial_nest = nest
            return None
        self._partial = self._partial_nest = None
        if self._structure is None:
            if nest is None or len(tree.flatten(nest)) != len(flat):
                raise errors.InvalidArgumentError(
                    "the first step defines the columns: give it whole, or in parts that are "
                    "dicts of distinct keys")
            self._define_columns(nest)
        unknown = [p for p in flat if p not in set(self._paths)]
        if unknown:
            raise errors.InvalidArgumentError(
                f"the step has leaves {unknown} that the first step did not have; this writer's "
                f"columns are fixed by its first step ({self._paths})")
        values, present = [], []
        for path, (shape, dtype) in zip(self._paths, self._specs):
            value = flat.get(path)
            if value is None:
                values.append(np.zeros(shape, dtype))
                present.append(False)
            else:
                values.append(self._checked(path, (shape, dtype), value))
                present.append(True)
        return self._append_values(values, present)

    @staticmethod
    def _checked(path, spec, value) -> np.ndarray:
        shape, dtype = spec
        value = np.asarray(value)
        if value.dtype != dtype:
            raise errors.InvalidArgumentError(
                f"Tensor of wrong dtype provided for column {path}. Got "
                f"{specs.tf_dtype_name(value.dtype)} but expected {specs.tf_dtype_name(dtype)}. Every step "
                "gives a column the dtype and shape of its first step.")
        if value.shape != shape:
            raise errors.InvalidArgumentError(
                f"Tensor of incompatible shape provided for column {path}. Got "
                f"{specs.tf_shape_text(value.shape)} which is incompatible with {specs.tf_shape_text(shape)}. "
                "Every step gives a column the dtype and shape of its first step.")
        return value

    def _append_values(self, values: List[np.ndarray], present: List[bool]):
        # The service writer gets the steps in their own structure (so whole steps can go to it
        # directly later), with zeros where a leaf is missing.
        if self._single_leaf:
            refs = [self._writer.append(values[0])]
        else:
            refs = tree.flatten(self._writer.append(tree.unflatten_as(self._structure, values)))
        cells = [ref if ok else None for ref, ok in zip(refs, present)]
        for history, cell in zip(self._history, cells):
            history.append(cell)
        if self._single_leaf:
            return cells[0]
        return tree.unflatten_as(self._structure, cells)

    def create_item(self, table: str, priority: float, trajectory: Any) -> None:
        """Creates an item for `table` whose columns are the `TrajectoryColumn` leaves of
        `trajectory` (from slicing `history`).

        Raises:
          InvalidArgumentError (a ValueError): a leaf that is not a TrajectoryColumn, an empty
          column, expired cells, a bad priority.
        """
        if self._closed:
            self._check_open()
        # A lone column (a one-leaf item) needs no structure walk. The service writer checks
        # that every cell is still kept alive.
        if type(trajectory) is TrajectoryColumn and trajectory.is_squeezed:
            self._writer.create_item(table, priority, trajectory._refs[0])  # noqa: SLF001
            return
        leaves = (trajectory,) if type(trajectory) is TrajectoryColumn else tree.flatten(trajectory)
        columns = []
        for leaf in leaves:
            if not isinstance(leaf, TrajectoryColumn):
                raise errors.InvalidArgumentError(
                    f"trajectory leaves must be TrajectoryColumns (from history), got {type(leaf).__name__}")
            if not leaf._refs:  # noqa: SLF001 - same module
                raise errors.InvalidArgumentError("an item column references no steps")
            columns.append(leaf.native())
        self._writer.create_item(table, priority, columns[0] if len(columns) == 1 else columns)

    def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None) -> None:
        """Sends every item and waits until at most `block_until_num_items` are unacknowledged.

        Raises:
          DeadlineExceededError: not within `timeout_ms` milliseconds; errors of the stream.
        """
        self._check_open()
        self._writer.flush(block_until_num_items, None if timeout_ms is None else timeout_ms / 1000)

    def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Flushes and starts a new episode. With `clear_buffers` the history is emptied and
        later items cannot reference earlier steps; without it the kept-alive steps stay in the
        history and items may still reference them.

        Raises:
          InvalidArgumentError: a partial step is open; as `flush`.
        """
        self._check_open()
        if self._partial:
            raise errors.InvalidArgumentError(
                "end_episode() called while a partial step is open; complete it with append()")
        try:
            self._writer.end_episode(clear_buffers, None if timeout_ms is None else timeout_ms / 1000)
        finally:
            if clear_buffers:  # the service writer released the steps even if the wait failed
                for history in self._history:
                    history.clear()

    def __del__(self):
        # As Reverb's writer does when it is destroyed: what was created is sent and acknowledged
        # first (within _DROPPED_WRITER_FLUSH_SECONDS here), so items created before the writer
        # went out of scope are in their tables once it is gone.
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            self._writer.flush(0, _DROPPED_WRITER_FLUSH_SECONDS)
        except BaseException:  # noqa: BLE001 - nowhere to report it from a finalizer
            pass
        try:
            self._writer.close(flush=False)
        except BaseException:  # noqa: BLE001
            pass

    def close(self) -> None:
        """Closes the stream (without flushing items not yet sent). Idempotent."""
        if not self._closed:
            self._closed = True
            self._writer.close(flush=False)

    def _check_open(self) -> None:
        if self._closed:
            raise errors.InvalidArgumentError("the writer is closed; create a new one")
