"""Reverb's `TrajectoryDataset` (`replay.reverb`): `replay.ReplayDataset` with Reverb's
arguments (`max_samples`; `flexible_batch_size` is accepted and ignored).

Elements are `ReplaySample(info, data)`, one per sampled item, `data` with the nest of
`dtypes` and `shapes` (the item's whole trajectory, time dimension included).
"""
from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from replay import errors
from replay.dataset import ReplayDataset


def check_max_samples(max_samples: int) -> None:
    if max_samples < 1 and max_samples != -1:
        raise errors.InvalidArgumentError(f"max_samples ({max_samples}) must be a positive integer or -1")


def plain_value(value, what: str):
    """A Python value from a constant tensor (Reverb accepts tensors for these arguments).

    Raises:
      InvalidArgumentError: a tensor whose value is not known when the dataset is built.
    """
    if isinstance(value, (tf.Tensor, tf.Variable)):
        constant = tf.get_static_value(value)
        if constant is None:
            raise errors.InvalidArgumentError(
                f"{what} must be a Python value or a constant tensor (its value is needed to build the dataset)")
        value = constant.item() if hasattr(constant, "item") else constant
    if isinstance(value, bytes):
        value = value.decode()
    return value


def table_signature(server_address: str, table: str, timeout_secs: Optional[float]):
    """(dtypes, shapes) nests of `table`'s signature, asked of the server at `server_address`.

    Raises:
      InvalidArgumentError (a ValueError, as Reverb raises): the server has no such table, or
      the table has no signature; DeadlineExceededError: no answer within timeout_secs.
    """
    from replay.reverb.client import Client

    client = Client(server_address)
    try:
        info = client.server_info(timeout_secs)
    finally:
        client.close()
    if table not in info:
        raise errors.InvalidArgumentError(
            f"Server at {server_address} does not contain any table named {table}. Found: "
            f"{', '.join(sorted(info))}.")
    signature = info[table].signature
    if not signature:
        raise errors.InvalidArgumentError(
            f"Table {table} at {server_address} does not have a signature; pass dtypes and shapes")
    return (tf.nest.map_structure(lambda s: s.dtype, signature),
            tf.nest.map_structure(lambda s: s.shape, signature))


class TrajectoryDataset(ReplayDataset, tf.compat.v1.data.Dataset):
    """A tf.data dataset of whole sampled items (Reverb's TrajectoryDataset).

    Like Reverb's, it is also a `tf.compat.v1.data.Dataset`: graph-mode code can call
    `make_one_shot_iterator()` / `make_initializable_iterator()` on it and on what its
    transformations (`batch`, `map`, ...) return.

    Raises (constructor):
      InvalidArgumentError (a ValueError): a bad argument, max_samples not positive or -1.
    """

    def __init__(self, server_address, table, dtypes: Any, shapes: Any, max_in_flight_samples_per_worker: int,
                 num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                 rate_limiter_timeout_ms: int = -1, max_samples: int = -1, flexible_batch_size: int = -1,
                 **kwargs):
        del flexible_batch_size
        server_address = plain_value(server_address, "server_address")
        table = plain_value(table, "table")
        max_samples = int(plain_value(max_samples, "max_samples"))
        check_max_samples(max_samples)
        super().__init__(server_address, table, dtypes, shapes,
                         int(plain_value(max_in_flight_samples_per_worker, "max_in_flight_samples_per_worker")),
                         int(plain_value(num_workers_per_iterator, "num_workers_per_iterator")),
                         int(plain_value(max_samples_per_stream, "max_samples_per_stream")),
                         int(plain_value(rate_limiter_timeout_ms, "rate_limiter_timeout_ms")),
                         max_samples=max_samples, **kwargs)

    def _as_variant_tensor(self):
        return self._pipeline._variant_tensor  # noqa: SLF001

    @classmethod
    def from_table_signature(cls, server_address, table, max_in_flight_samples_per_worker: int,
                             num_workers_per_iterator: int = -1, max_samples_per_stream: int = -1,
                             rate_limiter_timeout_ms: int = -1,
                             get_signature_timeout_secs: Optional[int] = None, max_samples: int = -1,
                             **kwargs) -> "TrajectoryDataset":
        """A TrajectoryDataset typed by the table's signature.

        Raises:
          InvalidArgumentError (a ValueError): no such table, or it has no signature;
          DeadlineExceededError: no answer within get_signature_timeout_secs.
        """
        server_address = plain_value(server_address, "server_address")
        table = plain_value(table, "table")
        dtypes, shapes = table_signature(server_address, table, get_signature_timeout_secs)
        return cls(server_address, table, dtypes, shapes, max_in_flight_samples_per_worker,
                   num_workers_per_iterator, max_samples_per_stream, rate_limiter_timeout_ms, max_samples,
                   **kwargs)
