"""Reverb's `TimestepDataset` (`replay.reverb`): sampled items split into their steps.

Built on `TrajectoryDataset`: each sampled item (every column with the same time dimension)
becomes consecutive elements `ReplaySample(info, step)`, one per step, all carrying the item's
`info`. `dtypes`/`shapes` describe one step; `max_samples` counts items.
"""
from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf
import tree

from replay.dataset import lists_to_tuples
from replay.replay_sample import ReplaySample
from replay.reverb.trajectory_dataset import (TrajectoryDataset, check_max_samples, plain_value,
                                              table_signature)


class TimestepDataset(tf.compat.v1.data.Dataset):
    """A tf.data dataset of steps of sampled items (Reverb's TimestepDataset).

    Like Reverb's, it is a `tf.compat.v1.data.Dataset` (so also a `tf.data.Dataset`):
    graph-mode code can call `make_one_shot_iterator()` / `make_initializable_iterator()`.

    Raises (constructor):
      InvalidArgumentError (a ValueError): a bad argument.
    """

    def __init__(self, server_address, table, dtypes: Any, shapes: Any, max_in_flight_samples_per_worker: int,
                 num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                 rate_limiter_timeout_ms: int = -1, max_samples: int = -1, **kwargs):
        check_max_samples(int(plain_value(max_samples, "max_samples")))
        step_shapes = lists_to_tuples(tree.map_structure_up_to(dtypes, tf.TensorShape, shapes))
        dtypes = lists_to_tuples(tree.map_structure(tf.as_dtype, dtypes))
        # Items come with a time dimension (written by a writer) or without one (inserted
        # whole, e.g. `Client.insert`, which is one step), so their rank is left open here
        # and each column gets its time dimension in `steps`.
        item_shapes = tree.map_structure(lambda _: tf.TensorShape(None), dtypes)
        self._items = TrajectoryDataset(server_address, table, dtypes, item_shapes,
                                        max_in_flight_samples_per_worker, num_workers_per_iterator,
                                        max_samples_per_stream, rate_limiter_timeout_ms, max_samples,
                                        step_shapes=step_shapes, **kwargs)

        def with_time_dimension(column, step_shape):
            if step_shape.rank is None:
                return column
            column = tf.cond(tf.equal(tf.rank(column), step_shape.rank),
                             lambda: tf.expand_dims(column, 0), lambda: column)
            return tf.ensure_shape(column, tf.TensorShape([None]).concatenate(step_shape))

        def steps(sample):
            data = tree.map_structure(with_time_dimension, sample.data, step_shapes)
            columns = tree.flatten(data)
            length = tf.shape(columns[0], out_type=tf.int64)[0]
            for column in columns[1:]:
                tf.debugging.assert_equal(
                    tf.shape(column, out_type=tf.int64)[0], length,
                    message="TimestepDataset: the columns of a sampled item have different lengths; "
                            "use TrajectoryDataset for such items")
            infos = tf.data.Dataset.from_tensors(sample.info).repeat(length)
            step_data = tf.data.Dataset.from_tensor_slices(data)
            return tf.data.Dataset.zip((infos, step_data)).map(lambda i, d: ReplaySample(i, d))

        self._pipeline = self._items.flat_map(steps)
        super().__init__()

    def _as_variant_tensor(self):
        return self._pipeline._variant_tensor  # noqa: SLF001

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
          InvalidArgumentError (a ValueError): no such table, or it has no signature.
        """
        server_address = plain_value(server_address, "server_address")
        table = plain_value(table, "table")
        dtypes, shapes = table_signature(server_address, table, get_signature_timeout_secs)
        return cls(server_address, table, dtypes, shapes, max_in_flight_samples_per_worker,
                   num_workers_per_iterator, max_samples_per_stream, rate_limiter_timeout_ms, max_samples)
