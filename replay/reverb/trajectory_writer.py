"""Reverb's `trajectory_writer` module (`replay.reverb`): the service's own writer classes.

`replay.trajectory_writer` implements Reverb 0.14's `TrajectoryWriter` API and semantics
(history indexed from the episode's start, partial steps, None leaves, expired references,
signature checks, millisecond timeouts); this module only gives them Reverb's module path.
"""
from replay.trajectory_columns import CellRef, TrajectoryColumn, _ColumnHistory  # noqa: F401
from replay.trajectory_writer import TrajectoryWriter

__all__ = ["CellRef", "TrajectoryColumn", "TrajectoryWriter"]
