"""Reverb's `TimestepDataset` (`replay.reverb`): sampled items split into their steps.

Built on `TrajectoryDataset`: each sampled item (every column with the same time dimension)
becomes consecutive elements `ReplaySample(info, step)`, one per step, all carrying the item's
`info`. `dtypes`/`shapes` describe one step; `max_samples` counts items.
"""
from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf
import tree

from replay.replay_sample import ReplaySample
from replay.reverb.trajectory_dataset import (TrajectoryDataset, check_max_samples, plain_value,
                                              table_signature)


class TimestepDataset(tf.data.Dataset):
    """A tf.data dataset of steps of sampled items (Reverb's TimestepDataset).

    Raises (constructor):
      InvalidArgumentError (a ValueError): a bad argument.
    """

    def __init__(self, server_address, table, dtypes: Any, shapes: Any, max_in_flight_samples_per_worker: int,
                 num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                 rate_limiter_timeout_ms: int = -1, max_samples: int = -1, **kwargs):
        check_max_samples(int(plain_value(max_samples, "max_samples")))
        dtypes = tree.map_structure(tf.as_dtype, dtypes)
        step_shapes = tree.map_structure_up_to(dtypes, tf.TensorShape, shapes)
        item_shapes = tree.map_structure_up_to(
            dtypes, lambda s: tf.TensorShape([None]).concatenate(s), step_shapes)
        self._items = TrajectoryDataset(server_address, table, dtypes, item_shapes,
                                        max_in_flight_samples_per_worker, num_workers_per_iterator,
                                        max_samples_per_stream, rate_limiter_timeout_ms, max_samples, **kwargs)

        def steps(sample):
            columns = tree.flatten(sample.data)
            length = tf.shape(columns[0], out_type=tf.int64)[0]
            for column in columns[1:]:
                tf.debugging.assert_equal(
                    tf.shape(column, out_type=tf.int64)[0], length,
                    message="TimestepDataset: the columns of a sampled item have different lengths; "
                            "use TrajectoryDataset for such items")
            infos = tf.data.Dataset.from_tensors(sample.info).repeat(length)
            data = tf.data.Dataset.from_tensor_slices(sample.data)
            return tf.data.Dataset.zip((infos, data)).map(lambda i, d: ReplaySample(i, d))

        self._pipeline = self._items.flat_map(steps)
        super().__init__(self._pipeline._variant_tensor)  # noqa: SLF001

    def _inputs(self):
        return [self._pipeline]

    @property
    def element_spec(self):
        return self._pipeline.element_spec

    @property
    def metrics(self):
        return self._items.metrics

    def close(self) -> None:
        """Ends the dataset's streams (see `replay.ReplayDataset.close`)."""
        self._items.close()

    @classmethod
    def from_table_signature(cls, server_address, table, max_in_flight_samples_per_worker: int,
                             num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                             rate_limiter_timeout_ms: int = -1,
                             get_signature_timeout_secs: Optional[int] = None, max_samples: int = -1):
        """A TimestepDataset typed by the table's signature (which describes one step).

        Raises:
          InvalidArgumentError: the table has no signature; NotFoundError: no such table.
        """
        server_address = plain_value(server_address, "server_address")
        table = plain_value(table, "table")
        dtypes, shapes = table_signature(server_address, table, get_signature_timeout_secs)
        return cls(server_address, table, dtypes, shapes, max_in_flight_samples_per_worker,
                   num_workers_per_iterator, max_samples_per_stream, rate_limiter_timeout_ms, max_samples)
