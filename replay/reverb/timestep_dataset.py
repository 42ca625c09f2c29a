"""Reverb's `TimestepDataset` (`replay.reverb`): `replay.ReplayDataset` with `emit_timesteps=True`
and Reverb's arguments.

Each sampled item becomes consecutive elements `ReplaySample(info, step)`, one per step, all
carrying the item's `info` (split from the received blocks with `replay.sample_blocks.split_steps`,
the same code and speed as the items of `ReplayDataset`). `dtypes`/`shapes` describe one step;
`max_samples` counts items.
"""
from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from replay.dataset import ReplayDataset
from replay.reverb.trajectory_dataset import check_max_samples, plain_value, table_signature


class TimestepDataset(ReplayDataset, tf.compat.v1.data.Dataset):
    """A tf.data dataset of steps of sampled items (Reverb's TimestepDataset).

    Like Reverb's, it is also a `tf.compat.v1.data.Dataset`: graph-mode code can call
    `make_one_shot_iterator()` / `make_initializable_iterator()` on it.

    Raises (constructor):
      InvalidArgumentError (a ValueError): a bad argument, max_samples not positive or -1.
    """

    def __init__(self, server_address, table, dtypes: Any, shapes: Any, max_in_flight_samples_per_worker: int,
                 num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                 rate_limiter_timeout_ms: int = -1, max_samples: int = -1, **kwargs):
        max_samples = int(plain_value(max_samples, "max_samples"))
        check_max_samples(max_samples)
        super().__init__(plain_value(server_address, "server_address"), plain_value(table, "table"),
                         dtypes, shapes,
                         int(plain_value(max_in_flight_samples_per_worker, "max_in_flight_samples_per_worker")),
                         int(plain_value(num_workers_per_iterator, "num_workers_per_iterator")),
                         int(plain_value(max_samples_per_stream, "max_samples_per_stream")),
                         int(plain_value(rate_limiter_timeout_ms, "rate_limiter_timeout_ms")),
                         max_samples=max_samples, emit_timesteps=True, **kwargs)

    def _as_variant_tensor(self):
        return self._pipeline._variant_tensor  # noqa: SLF001

    @classmethod
    def from_table_signature(cls, server_address, table, max_in_flight_samples_per_worker: int,
                             num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                             rate_limiter_timeout_ms: int = -1,
                             get_signature_timeout_secs: Optional[int] = None, max_samples: int = -1):
        """A TimestepDataset typed by the table's signature (which describes one step).

        Raises:
          InvalidArgumentError (a ValueError): no such table, or it has no signature;
          DeadlineExceededError: no answer within get_signature_timeout_secs.
        """
        server_address = plain_value(server_address, "server_address")
        table = plain_value(table, "table")
        dtypes, shapes = table_signature(server_address, table, get_signature_timeout_secs)
        return cls(server_address, table, dtypes, shapes, max_in_flight_samples_per_worker,
                   num_workers_per_iterator, max_samples_per_stream, rate_limiter_timeout_ms, max_samples)
