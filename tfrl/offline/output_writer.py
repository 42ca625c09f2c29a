"""OutputWriter: where a rollout worker records the sample batches it produces (`output`).

`RolloutWorker.sample()` hands every batch it returns to its writer before the batch goes on
(to replay or to the caller). `make_output_writer` (recording.py) picks the format from
`output_format`: TFRecord files of tf.train.Example records (tfrecord_writer.py, the native format) or
RLlib-classic JSON lines (json_writer.py). Both rotate to a new file after
`output_max_file_size` bytes and name files
`output-<time>_worker-<worker_index>_<n>.<tfrecord|json>`, so workers never share a file.

Behaviour probabilities are part of what is recorded: a batch with `action_logp` also gets
`action_prob` (its exponential), the column off-policy estimators read.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Optional

import numpy as np

from tfrl import errors
from tfrl.policy.sample_batch import SampleBatch

DEFAULT_POLICY_ID = "default_policy"


class OutputWriter:
    """Records sample batches. Subclasses implement `_write_policy_batch` and `_close_file`."""

    extension = ""

    def __init__(self, directory: str, worker_index: int = 0,
                 max_file_size: int = 64 * 1024 * 1024):
        """
        Raises:
          InvalidConfigError: the directory cannot be created.
        """
        self.directory = os.path.abspath(os.path.expanduser(directory))
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise errors.InvalidConfigError(
                f"output directory {self.directory!r} cannot be created ({exc}); set `output` "
                "to a writable directory") from exc
        self.worker_index = worker_index
        self.max_file_size = max_file_size
        self.file_index = 0
        self.path: Optional[str] = None
        self.bytes_in_file = 0
        self.files_written: list = []

    def write(self, batch: Any) -> None:
        """Records `batch` (a SampleBatch, or a MultiAgentBatch as one record per policy).

        Raises:
          InvalidBatchError: a column a record cannot hold (see batch_record.py).
          OSError: the file cannot be written.
        """
        if hasattr(batch, "policy_batches"):
            parts: Dict[str, SampleBatch] = dict(batch.policy_batches)
        else:
            parts = {DEFAULT_POLICY_ID: batch}
        for policy_id, policy_batch in parts.items():
            if policy_batch.count == 0:
                continue
            if self.path is None or self.bytes_in_file >= self.max_file_size:
                self._next_file()
            self.bytes_in_file += self._write_policy_batch(
                with_behaviour_probs(policy_batch), policy_id)

    def _next_file(self) -> None:
        if self.path is not None:
            self._close_file()
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        self.path = os.path.join(
            self.directory,
            f"output-{stamp}_worker-{self.worker_index}_{self.file_index}.{self.extension}")
        self.file_index += 1
        self.bytes_in_file = 0
        self.files_written.append(self.path)
        self._open_file(self.path)

    def close(self) -> None:
        """Flushes and closes the current file."""
        if self.path is not None:
            self._close_file()
            self.path = None

    # --- for subclasses ---------------------------------------------------------------------
    def _open_file(self, path: str) -> None:
        raise NotImplementedError

    def _write_policy_batch(self, batch: SampleBatch, policy_id: str) -> int:
        """Writes one policy's batch to the open file (flushed); returns the bytes written."""
        raise NotImplementedError

    def _close_file(self) -> None:
        raise NotImplementedError


def with_behaviour_probs(batch: SampleBatch) -> SampleBatch:
    """`batch` with `action_prob` = exp(`action_logp`) when it has the one but not the other."""
    if SampleBatch.ACTION_LOGP in batch and SampleBatch.ACTION_PROB not in batch:
        batch = batch.copy(shallow=True)
        batch[SampleBatch.ACTION_PROB] = np.exp(
            np.asarray(batch[SampleBatch.ACTION_LOGP], np.float64)).astype(np.float32)
    return batch
