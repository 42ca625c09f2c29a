"""What `Client.sample` yields: `ReplaySample(info, data)` with `SampleInfo` (Reverb's names),
and the items' columns shaped as Reverb gives them (strings as bytes, `emit_timesteps` steps).

`info` describes the sampled item at the moment it was sampled; `data` is the item's content as
a nest of numpy arrays (the table signature's structure when the table has one, else a flat
list of columns).
"""
from __future__ import annotations

from typing import Any, List, NamedTuple

import numpy as np

from replay import errors


class SampleInfo(NamedTuple):
    """Key, sampling probability, table size, priority and times_sampled (after this sample) of
    a sampled item, as the table saw them when it sampled the item."""

    key: Any
    probability: Any
    table_size: Any
    priority: Any
    times_sampled: Any

    @classmethod
    def tf_dtypes(cls) -> "SampleInfo":
        """The TensorFlow dtype of each field in datasets and TF ops (Reverb's choice)."""
        import tensorflow as tf

        return cls(tf.uint64, tf.float64, tf.int64, tf.float64, tf.int32)

    @classmethod
    def tf_shapes(cls) -> "SampleInfo":
        import tensorflow as tf

        return cls(*[tf.TensorShape([]) for _ in cls._fields])

    @classmethod
    def zeros(cls) -> "SampleInfo":
        return cls(0, 0.0, 0, 0.0, 0)


class ReplaySample(NamedTuple):
    """One sampled item: `info` (a SampleInfo) and `data` (nest of arrays)."""

    info: SampleInfo
    data: Any


def as_reverb_column(column: np.ndarray) -> np.ndarray:
    """A sampled column as Reverb gives it: str columns as UTF-8 bytes (Reverb stores strings as
    tf.string and samples them as bytes), other columns unchanged."""
    return np.char.encode(column, "utf-8") if column.dtype.kind == "U" else column


def timesteps(info: SampleInfo, columns: List[np.ndarray], unflatten) -> List[ReplaySample]:
    """One item's steps (Reverb's `emit_timesteps`): every column split along its first dimension.

    Raises:
      InvalidArgumentError: a column without a first dimension, or columns of different lengths.
    """
    if any(column.ndim == 0 for column in columns) or len({len(column) for column in columns}) != 1:
        raise errors.InvalidArgumentError(
            "Can't split non timestep trajectory into timesteps: the columns have shapes "
            f"{[column.shape for column in columns]} (sample with emit_timesteps=False)")
    # Each column cut into its steps in one pass (a row view each; a 0-d view of a 1-D column's
    # element, as Reverb's np.asarray(col[i]) gives), then the steps zipped across columns.
    length = len(columns[0])
    per_column = [list(column) if column.ndim > 1 else [column[t, ...] for t in range(length)]
                  for column in columns]
    if unflatten is None:
        return [ReplaySample(info, list(step)) for step in zip(*per_column)]
    return [ReplaySample(info, unflatten(list(step))) for step in zip(*per_column)]
