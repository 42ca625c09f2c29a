"""Writer: Reverb's legacy writer. Append steps; each item is the last N steps of every leaf.

The simplest way for a rollout worker to write experience, with the API of Reverb 0.14's
`Writer` (`replay.reverb.Writer` is this class): `append` one step (or `append_sequence`
several), then `create_item(table, num_timesteps, priority)` makes an item of the last
`num_timesteps` steps, each column with a leading time dimension of that length. It is a thin
layer over `TrajectoryWriter` (same chunking, asynchronous batched sending, acks and error
reporting), keeping the last `max_sequence_length` steps alive. As Reverb's, it does not check
items against table signatures (the server does).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
import tree

from replay import errors
from replay.trajectory_writer import TrajectoryWriter

logger = logging.getLogger(__name__)


class Writer:
    """Writes steps and fixed-length items over one stream.

    Create it with `Client.writer(max_sequence_length, ...)`.

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
                f"max_sequence_length ({max_sequence_length}) must be a positive integer")
        self.max_sequence_length = int(max_sequence_length)
        self._writer = TrajectoryWriter(client, num_keep_alive_refs=max_sequence_length,
                                        chunk_length=chunk_length, delta_encoded=delta_encoded,
                                        max_in_flight_items=max_in_flight_items)
        self._closed = False

    def __repr__(self) -> str:
        return f"Writer(max_sequence_length={self.max_sequence_length}), closed: {self._closed}"

    @property
    def episode_steps(self) -> int:
        """Steps appended in the current episode."""
        return self._writer.episode_steps

    def append(self, data: Any) -> None:
        """Appends one step (a nest of arrays with the same structure, dtypes and shapes each time).

        Raises:
          InvalidArgumentError (a ValueError): a dtype or shape other than the first step's (a
            step lacking leaves fails at `create_item`). CancelledError (a RuntimeError): the writer is closed.
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
            self.append(tree.unflatten_as(sequence, step) if nested else step[0])

    def create_item(self, table: str, num_timesteps: int, priority: float) -> None:
        """Creates an item for `table` from the last `num_timesteps` appended steps.

        Raises:
          InvalidArgumentError (a ValueError): num_timesteps < 1, or more than the steps buffered
            (at most max_sequence_length, of this episode); a bad priority; a step among them
            lacking a leaf. Errors of the stream
            (see `flush`).
        """
        if num_timesteps < 1:
            raise errors.InvalidArgumentError(f"num_timesteps ({num_timesteps}) must be a positive integer")
        if num_timesteps > self.max_sequence_length or num_timesteps > self._writer.episode_steps:
            raise errors.InvalidArgumentError(
                f"Argument `num_timesteps` is larger than number of buffered timesteps "
                f"(num_timesteps={num_timesteps}, {min(self.max_sequence_length, self._writer.episode_steps)} "
                "buffered).")
        self._writer.create_item_from_last_steps(table, priority, num_timesteps)

    def flush(self, *, timeout_ms: Optional[int] = None) -> None:
        """Sends everything and waits until the server acknowledged every item.

        Args:
          timeout_ms: (an extension) how long to wait; None: no limit.

        Raises:
          DeadlineExceededError: not within `timeout_ms`; UnavailableError: the server went
          away; NotFoundError / SignatureMismatchError / InvalidArgumentError: the server refused
          an item (the writer is unusable afterwards).
        """
        self._writer.flush(0, timeout_ms)

    def end_episode(self, *, timeout_ms: Optional[int] = None) -> None:
        """(An extension.) Flushes and starts a new episode: later items cannot reach back into
        this one.

        Raises: as `flush`.
        """
        self._writer.end_episode(timeout_ms=timeout_ms)

    def close(self, retry_on_unavailable: bool = True) -> None:
        """Flushes and closes the stream. `retry_on_unavailable` is accepted for Reverb's
        signature; a writer whose server went away raises UnavailableError.

        Raises:
          InvalidArgumentError (a ValueError): close was already called. As `flush`.
        """
        del retry_on_unavailable
        if self._closed:
            raise errors.InvalidArgumentError("close() has already been called on Writer.")
        self._closed = True
        self._writer.close(flush=True)

    def __enter__(self) -> "Writer":
        if self._closed:
            raise errors.InvalidArgumentError("Cannot reuse already closed Writer")
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._closed:
            return
        if exc_type is None:
            self.close()
        else:
            self._closed = True
            try:
                self._writer.close()
            except errors.ReplayError:
                pass  # the original exception is the one to see

    def __del__(self):
        if not getattr(self, "_closed", True):
            logger.warning("Writer-object deleted without calling .close explicitly.")
            self._closed = True
            self._writer._close_dropped()  # noqa: SLF001 - not close(): this may run in any collection
