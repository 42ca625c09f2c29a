"""Creating items in a trajectory writer: `create_item` (any kept-alive cells, with a fast path
for one cell), `create_item_from_last_steps` (the legacy `Writer`'s), their checks (expired
references, a column's dtypes and shapes, the table's signature with `validate_items`) and
whether a cell is still kept alive.

Part of the trajectory writer (`replay.trajectory_writer`): `_ItemCreation` is one of the
`TrajectoryWriter`'s bases and works on the writer's state (see `TrajectoryWriter.__init__`);
items wait in its queue of pending items until `replay.trajectory_sending` sends them.
See docs/architecture.md, "Module map".
"""
from __future__ import annotations

from typing import Any, Sequence

import tree

from replay import errors, specs, validation
from replay.item_signature_check import _check_against_signature, _table_signature
from replay.step_structure import _both_strings
from replay.trajectory_chunks import _item_columns
from replay.trajectory_columns import CellRef, TrajectoryColumn, _cell


class _ItemCreation:
    """The trajectory writer's one role of turning references to kept-alive cells into pending
    items; a base of `TrajectoryWriter`, on whose state it works."""

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
            cell = trajectory._data_references[0]  # noqa: SLF001 - the writer's own references
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
            builder = cell._builder  # noqa: SLF001 - the writer's own references
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
                run = leaf._run  # noqa: SLF001 - the writer's own references
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
                cells = leaf._data_references  # noqa: SLF001 - the writer's own references
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
                builder = cell._builder  # noqa: SLF001 - the writer's own references
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
        signature = _table_signature(self._client, table, self._signature_timeout, self._stream)
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
                builder = cell._builder  # noqa: SLF001 - the writer's own references
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
        builder = cell._builder  # noqa: SLF001 - the writer's own references
        return not builder.released and builder.start_serial + cell.offset >= self._serial - self._keep

