"""The writer's references to what it wrote: CellRef (one leaf of one step), TrajectoryColumn
(an item's column of them) and _ColumnHistory (one column of `TrajectoryWriter.history`).

Part of the trajectory writer (`replay.trajectory_writer`), which makes them; a CellRef reaches
its writer only through its chunk builder (`replay.trajectory_chunks`), to know if it expired.
See docs/architecture.md, "Module map" and "Data path".
"""
from __future__ import annotations

import itertools
from typing import Deque, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from replay import errors


class CellRef:
    """A reference to one leaf of one appended step (Reverb's WeakCellRef). It keeps the leaf's
    value (`numpy()`) and knows whether its step left the writer's keep-alive window (`expired`).
    As an extension of Reverb's API, a CellRef used as a leaf of an item's trajectory is a
    squeezed one-step column (as `TrajectoryColumn([ref], squeeze=True)`)."""

    __slots__ = ("_builder", "offset", "leaf", "shape", "dtype", "_value")

    def __init__(self, builder, offset: int, leaf: int, shape, dtype, value=None):
        self._builder = builder
        self.offset = offset
        self.leaf = leaf
        self.shape = shape
        self.dtype = dtype
        # None for a step of a batch (`TrajectoryWriter.extend`): its row is read from the
        # batch when asked for, so writing a batch makes no per-step array views
        self._value = value

    @property
    def value(self):
        value = self._value
        if value is None:
            value = self._value = self._builder.rows[self.leaf][self.offset]
        return value

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
        return writer is None or not writer._kept_alive(self)  # noqa: SLF001 - the writer's own check

    def numpy(self) -> np.ndarray:
        """The leaf's value, as appended."""
        return self.value

    def __repr__(self) -> str:
        return f"CellRef(episode={self.episode_id}, step={self.step}, leaf={self.leaf})"


def _cell(entry) -> Optional[CellRef]:
    """A history entry as a CellRef: the entry itself (or None), or, for a step a batch wrote
    (`TrajectoryWriter.extend`), the CellRef its (chunk builder, offset, leaf) entry stands for:
    a batch's cells are made when first asked for, so writing a batch makes none."""
    if type(entry) is not tuple:
        return entry
    builder, offset, leaf = entry
    rows = builder.rows[leaf]
    return CellRef(builder, offset, leaf, rows.shape[1:], rows.dtype)


def _position(entry) -> Optional[tuple]:
    """(chunk builder, offset, leaf) of a history entry; None for None."""
    if entry is None or type(entry) is tuple:
        return entry
    return entry._builder, entry.offset, entry.leaf  # noqa: SLF001 - same module


def _none_reference_error(path, references) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        f"TrajectoryColumns cannot contain any None data references: TrajectoryColumn at path "
        f"{path} got {list(references)}.")


class TrajectoryColumn:
    """A column of an item (Reverb's TrajectoryColumn): cells of one column of the history,
    stacked along a leading time dimension, or one cell without it when `squeeze` is set.

    Raises (constructor):
      InvalidArgumentError (a ValueError): `squeeze` with other than one reference, or a None
        reference (a step where the column had no value, or one that left the history).
    """

    __slots__ = ("_refs", "_entries", "is_squeezed", "_path", "_run")

    def __init__(self, data_references: Sequence[Optional[CellRef]], *, squeeze: bool = False,
                 path: Optional[tuple] = None):
        if squeeze and len(data_references) != 1:
            raise errors.InvalidArgumentError(
                f"Columns must contain exactly one data reference when squeeze set, got "
                f"{len(data_references)}")
        if None in data_references:
            raise _none_reference_error(path, data_references)
        self._refs = tuple(data_references)
        self._entries = None
        self.is_squeezed = bool(squeeze)
        self._path = path
        # Set by the history for the cells of consecutive steps of one column in one chunk:
        # (chunk builder, first offset, number of cells, leaf); the writer then handles the
        # column as one slice, and its CellRefs are made (from `_entries`) only if asked for.
        self._run = None

    @property
    def _data_references(self) -> Tuple[CellRef, ...]:
        refs = self._refs
        if refs is None:
            refs = self._refs = tuple(map(_cell, self._entries))
            self._entries = None
        return refs

    def __len__(self) -> int:
        refs = self._refs
        return len(refs) if refs is not None else len(self._entries)

    def __iter__(self) -> Iterator[CellRef]:
        return iter(self._data_references)

    def __getitem__(self, val) -> "TrajectoryColumn":
        """An int gives a squeezed column of that cell; a slice or a list of ints, a column.

        Raises:
          IndexError: an index outside the column; TypeError: another kind of index.
        """
        refs = self._data_references
        if isinstance(val, int):
            return TrajectoryColumn([refs[val]], squeeze=True)
        if isinstance(val, slice):
            return TrajectoryColumn(refs[val])
        if isinstance(val, list):
            return TrajectoryColumn([refs[x] for x in val])
        raise TypeError(f"TrajectoryColumn indices must be integers or slices, not {type(val)}")

    @property
    def shape(self) -> Tuple[int, ...]:
        if self.is_squeezed:
            return tuple(self._data_references[0].shape)
        return (len(self._data_references), *self._data_references[0].shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data_references[0].dtype

    def numpy(self) -> np.ndarray:
        """The referenced values, stacked along time unless the column is squeezed.

        Raises:
          FailedPreconditionError (a RuntimeError): a reference has expired.
        """
        if any(ref.expired for ref in self._data_references):
            raise errors.FailedPreconditionError(
                "Cannot convert TrajectoryColumn with expired data references to numpy array.")
        if self.is_squeezed:
            return self._data_references[0].value
        return np.stack([ref.value for ref in self._data_references])

    def __repr__(self) -> str:
        return f"TrajectoryColumn(length={len(self)}, squeeze={self.is_squeezed}, path={self._path})"


def _run_column(entries: list, run: tuple, path: Optional[tuple]) -> TrajectoryColumn:
    """A column of history entries known to be one run (see `TrajectoryColumn._run`)."""
    column = TrajectoryColumn.__new__(TrajectoryColumn)
    column._refs = None  # noqa: SLF001 - made from the entries when asked for
    column._entries = entries  # noqa: SLF001
    column.is_squeezed = False
    column._path = path  # noqa: SLF001
    column._run = run  # noqa: SLF001
    return column


class _ColumnHistory:
    """One column's cells of every step since the episode began (since the writer was created
    or `end_episode(clear_buffers=True)`), indexed like a list: non-negative indices count from
    the first step, negative ones from the last. Only the last `num_keep_alive_refs` cells are
    kept; an older step, or one where the column had no value, is a None reference, which
    `TrajectoryColumn` refuses with a ValueError (as Reverb's does).

    The column's kept cells are a deque shared with the writer, which appends to it; `count`
    (shared by all columns of a writer, a one-element list) is the number of steps so far.
    """

    __slots__ = ("_path", "_cells", "_count")

    def __init__(self, path: tuple, cells: Deque[Optional[CellRef]], count: List[int]):
        self._path = path
        self._cells = cells
        self._count = count

    def path(self) -> tuple:
        return self._path

    def __len__(self) -> int:
        return self._count[0]

    def __iter__(self) -> Iterator[Optional[CellRef]]:
        cells = self._cells
        yield from itertools.repeat(None, self._count[0] - len(cells))
        yield from map(_cell, list(cells))

    def _at(self, i: int) -> Optional[CellRef]:
        """The cell of step i (0 <= i < len), None where it is no longer kept."""
        cells = self._cells
        kept_from = self._count[0] - len(cells)
        return _cell(cells[i - kept_from]) if i >= kept_from else None

    def __getitem__(self, val) -> TrajectoryColumn:
        """An int gives a squeezed column of one step; a slice or a list of ints, a column.

        Raises:
          IndexError: a non-negative index at or past the number of steps.
          InvalidArgumentError (a ValueError): a step no longer kept (or before the first), or
            one where the column had no value.
          TypeError: another kind of index.
        """
        if type(val) is int:
            cells = self._cells
            if val < 0:  # the usual case: the last steps
                cell = _cell(cells[val]) if -val <= len(cells) else None
            else:
                cell = self._at(self._checked_index(val))
            if cell is None:
                raise _none_reference_error(self._path + (val,), [None])
            column = TrajectoryColumn.__new__(TrajectoryColumn)
            column._refs = (cell,)  # noqa: SLF001 - the constructor's checks, done above
            column._entries = None  # noqa: SLF001
            column.is_squeezed = True
            column._path = None  # noqa: SLF001 - (only error messages name it)
            column._run = None  # noqa: SLF001
            return column
        path = self._path + (val,)
        if isinstance(val, slice):
            n = self._count[0]
            if val.step is None and val.stop is None and type(val.start) is int and -len(self._cells) <= val.start < 0:
                entries = list(self._cells)[val.start:]
                first, last = _position(entries[0]), _position(entries[-1])
                # consecutive steps without a gap (no None), first and last in one chunk: every
                # cell between is that chunk's, at consecutive offsets
                if (first is not None and last is not None and first[0] is last[0]
                        and last[1] - first[1] == len(entries) - 1 and None not in entries):
                    return _run_column(entries, (first[0], first[1], len(entries), first[2]), path)
                return TrajectoryColumn(list(map(_cell, entries)), path=path)
            if val.start is None and val.stop is not None:
                # as Reverb's: the kept cells before `stop` (no None for steps no longer kept);
                # [:0] is empty and a stop at or past the end takes every kept cell (where
                # Reverb's arithmetic gives an empty column or only the oldest kept cells)
                if val.stop == 0:
                    return TrajectoryColumn([], path=path)
                stop = val.stop - n if val.stop > 0 else val.stop
                cells = list(map(_cell, self._cells))
                if -n < stop < -len(cells):
                    raise _none_reference_error(path, [None])
                return TrajectoryColumn(cells[:stop if stop < 0 else None:val.step], path=path)
            if val.start is not None and val.start < -n:
                # as Reverb's: a start before the episode's first step is a None reference
                raise _none_reference_error(path, [None])
            return TrajectoryColumn([self._at(i) for i in range(*val.indices(n))], path=path)
        if isinstance(val, list):
            n = self._count[0]
            return TrajectoryColumn([self._at(self._checked_index(x)) if x >= 0 else
                                     (self._at(x + n) if x + n >= 0 else None) for x in val], path=path)
        raise TypeError(f"_ColumnHistory indices must be integers or slices, not {type(val)}")

    def _checked_index(self, i: int) -> int:
        if i >= self._count[0]:
            raise IndexError("list index out of range")
        return i

    def __repr__(self) -> str:
        return f"_ColumnHistory(path={self._path}, steps={self._count[0]}, kept={len(self._cells)})"

