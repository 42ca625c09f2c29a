"""Appending many steps in one call to a trajectory writer: `extend` (n whole steps) and
`append_step_items` (n steps and one item per step), with the work per chunk instead of per
step, for vectorised environments and fragments.

Part of the trajectory writer (`replay.trajectory_writer`): `_BatchAppending` is one of the
`TrajectoryWriter`'s bases and works on the writer's state (see `TrajectoryWriter.__init__`),
using the column layout of `replay.trajectory_steps`.
See docs/architecture.md, "Module map".
"""
from __future__ import annotations

import collections
import itertools
from typing import Any, List

import numpy as np
import tree

from replay import errors
from replay.item_signature_check import _check_against_signature, _table_signature
from replay.step_structure import _both_strings
from replay.trajectory_chunks import _ChunkBuilder


class _BatchAppending:
    """The trajectory writer's one role of appending batches of steps (`extend`,
    `append_step_items`); a base of `TrajectoryWriter`, on whose state it works."""

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
        elif type(steps) is np.ndarray and steps.ndim > 0 and self._one_leaf and self._dense:
            # the steps of a one-array writer, known columns: no structure to walk
            structure, leaves = steps, [steps]
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
                signature = _table_signature(self._client, table, self._signature_timeout, self._stream)
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
            oldest = window[0]
            if leaving == len(window) and type(oldest) is not tuple and window.count(oldest) == leaving:
                left = {oldest: leaving}  # the usual batch: all of the window, one chunk's steps
                window.clear()
            else:
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

