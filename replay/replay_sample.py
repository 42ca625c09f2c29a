"""What `Client.sample` yields: `ReplaySample(info, data)` with `SampleInfo` (Reverb's names).

`info` describes the sampled item at the moment it was sampled; `data` is the item's content as
a nest of numpy arrays (the table signature's structure when the table has one, else a flat
list of columns).
"""
from __future__ import annotations

from typing import Any, NamedTuple


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
