"""Writer: Reverb's legacy writer. Append steps; each item is the last N steps of every leaf.

The simplest way for a rollout worker to write experience: `append` one step (or
`append_sequence` several), then `create_item(table, num_timesteps, priority)` makes an item of
the last `num_timesteps` steps, each column with a leading time dimension of that length. It is
a thin layer over `TrajectoryWriter` (same chunking, asynchronous batched sending, acks and
error reporting), keeping the last `max_sequence_length` steps alive.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import tree

from replay import errors
from replay.trajectory_writer import TrajectoryWriter


class Writer:
    """Writes steps and fixed-length items over one stream.

    Args:
      client: the `Client`.
      max_sequence_length: the longest item (in steps) this writer can create.
      chunk_length: steps per chunk; None closes a chunk when an item references it.
      delta_encoded: delta-encode integer columns along time.
      max_in_flight_items: unacknowledged items beyond which calls block (None: sized from
        the first step, see `TrajectoryWriter`).

    Raises:
      InvalidArgumentError: non-positive lengths or budget.
    """

    def __init__(self, client, max_sequence_length: int, chunk_length: Optional[int] = None,
                 delta_encoded: bool = False, max_in_flight_items: Optional[int] = None):
        if max_sequence_length <= 0:
            raise errors.InvalidArgumentError(
                f"max_sequence_length must be positive, got {max_sequence_length}")
        self.max_sequence_length = int(max_sequence_length)
        self._writer = TrajectoryWriter(client, num_keep_alive_refs=max_sequence_length,
                                        chunk_length=chunk_length, delta_encoded=delta_encoded,
                                        max_in_flight_items=max_in_flight_items)

    @property
    def episode_steps(self) -> int:
        """Steps appended in the current episode."""
        return self._writer.episode_steps

    def append(self, data: Any) -> None:
        """Appends one step (a nest of arrays with the same structure, dtypes and shapes each time).

        Raises: as `TrajectoryWriter.append`.
        """
        self._writer.append(data)

    def append_sequence(self, sequence: Any) -> None:
        """Appends several steps at once: every leaf of `sequence` has a leading time dimension
        of the same length T, and step t is the nest of the leaves' t-th entries.

        Raises:
          InvalidArgumentError: leaves with no or different leading dimensions; as `append`.
        """
        leaves = [np.asarray(x) for x in tree.flatten(sequence)]
        lengths = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
        if len(lengths) != 1 or None in lengths:
            raise errors.InvalidArgumentError(
                f"append_sequence needs every leaf to have the same leading time dimension, got "
                f"{[leaf.shape for leaf in leaves]}")
        nested = tree.is_nested(sequence)
        for t in range(lengths.pop()):
            step = [leaf[t] for leaf in leaves]
            self._writer.append(tree.unflatten_as(sequence, step) if nested else step[0])

    def create_item(self, table: str, num_timesteps: int, priority: float) -> None:
        """Creates an item for `table` from the last `num_timesteps` appended steps.

        Raises:
          InvalidArgumentError: num_timesteps < 1, more than max_sequence_length or than the steps
            appended in this episode; a bad priority. Errors of the stream (see `flush`).
        """
        if not 1 <= num_timesteps <= self.max_sequence_length:
            raise errors.InvalidArgumentError(
                f"num_timesteps must be between 1 and max_sequence_length={self.max_sequence_length}, "
                f"got {num_timesteps}")
        if num_timesteps > self._writer.episode_steps:
            raise errors.InvalidArgumentError(
                f"num_timesteps={num_timesteps} but only {self._writer.episode_steps} steps were "
                "appended in this episode")
        self._writer.create_item_from_last_steps(table, priority, num_timesteps)

    def flush(self, timeout: Optional[float] = None) -> None:
        """Sends everything and waits until the server acknowledged every item.

        Raises:
          DeadlineExceededError: not within `timeout` seconds; UnavailableError: the server went
          away; NotFoundError / SignatureMismatchError / InvalidArgumentError: the server refused
          an item (the writer is unusable afterwards).
        """
        self._writer.flush(0, timeout)

    def end_episode(self, timeout: Optional[float] = None) -> None:
        """Flushes and starts a new episode: later items cannot reach back into this one.

        Raises: as `flush`.
        """
        self._writer.end_episode(timeout=timeout)

    def close(self) -> None:
        """Flushes and closes the stream. Idempotent.

        Raises: as `flush`.
        """
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self._writer.__exit__(exc_type, exc, tb)
