"""The trajectory writer's chunks as it builds them: _ChunkBuilder (the steps of one chunk, then
what the writer knows of it once sent), the adaptive compression constants it encodes them with,
and the wire item columns (chunk slices) that items' cells become.

Part of the trajectory writer (`replay.trajectory_writer`); the encoding itself is
`replay.chunks`, the wire types `replay.items`.
See docs/architecture.md, "Module map" and "Data path".
"""
from __future__ import annotations

import weakref
from typing import List, Optional

import numpy as np

from replay.items import TrajectoryColumn as WireColumn

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


class _ChunkBuilder:
    """The steps of one chunk being written, then what the writer knows of it once sent (its
    key, whether items may still reference it) until it is released."""

    __slots__ = ("key", "writer", "episode_id", "start_index", "start_serial", "steps", "columns",
                 "rows", "closed", "sent", "released", "pending_items", "live_steps")

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
        # the same arrays, kept after sending: the values of the steps' CellRefs
        self.rows: Optional[List[np.ndarray]] = None
        self.closed = False  # no more steps; the chunk is encoded when first sent
        self.sent = False
        self.released = False
        self.pending_items = 0  # created items referencing it that were not sent yet
        self.live_steps = 0  # its steps still inside the keep-alive window


def _item_columns(columns, runs=None) -> List[WireColumn]:
    """Wire item columns from cell tuples: runs of consecutive cells of one chunk become one
    slice. `runs` (None, or per column None or (chunk builder, first offset, length, leaf))
    names columns already known to be one such run."""
    out = []
    for index, (cells, squeeze) in enumerate(columns):
        run = runs[index] if runs is not None else None
        if run is not None:
            builder, offset, length, leaf = run
            out.append((squeeze, ((builder.key, offset, length, leaf),)))
            continue
        if len(cells) == 1:  # the common step item: one cell per column
            cell = cells[0]
            out.append((squeeze, ((cell._builder.key, cell.offset, 1, cell.leaf),)))  # noqa: SLF001
            continue
        slices = []
        run_builder, run_offset, run_length, run_leaf = None, 0, 0, 0
        for cell in cells:
            builder = cell._builder  # noqa: SLF001 - the writer's cells of its builders
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
