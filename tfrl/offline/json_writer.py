"""JsonWriter: `output_format: json`, RLlib-classic JSON lines.

One line per batch, as classic RLlib's JsonWriter writes them and its JsonReader reads them:
`{"type": "SampleBatch", "<column>": [rows...], ...}`, or for a multi-agent batch
`{"type": "MultiAgentBatch", "count": N, "policy_batches": {"<policy_id>": {...}}}`. Every
column is a plain JSON list (classic RLlib packs compressed columns with pickle, which tfrl
neither writes nor reads), and a `dones` column (terminated or truncated) is added for readers
that split episodes by it. See output_writer.py for rotation and names.
"""
from __future__ import annotations

import json

import numpy as np

from tfrl.offline.batch_record import recordable_columns
from tfrl.offline.output_writer import DEFAULT_POLICY_ID, OutputWriter, with_behaviour_probs
from tfrl.policy.sample_batch import SampleBatch

DONES = "dones"  # RLlib-classic's episode-end column


def batch_to_json_dict(batch: SampleBatch) -> dict:
    """The classic JSON columns of one SampleBatch (plain lists).

    Raises:
      InvalidBatchError: a nested column.
    """
    out = {name: array.tolist() for name, array in recordable_columns(batch)}
    if DONES not in out and SampleBatch.TERMINATEDS in batch:
        dones = np.asarray(batch[SampleBatch.TERMINATEDS], bool)
        if SampleBatch.TRUNCATEDS in batch:
            dones = dones | np.asarray(batch[SampleBatch.TRUNCATEDS], bool)
        out[DONES] = dones.tolist()
    return out


class JsonWriter(OutputWriter):
    """Writes `output-..._worker-<i>_<n>.json` files of RLlib-classic JSON lines."""

    extension = "json"

    def __init__(self, directory: str, worker_index: int = 0,
                 max_file_size: int = 64 * 1024 * 1024):
        super().__init__(directory, worker_index, max_file_size)
        self._file = None

    def write(self, batch) -> None:
        """Records `batch`; a MultiAgentBatch is one classic MultiAgentBatch line.

        Raises:
          InvalidBatchError: a nested column.
          OSError: the file cannot be written.
        """
        if hasattr(batch, "policy_batches"):
            if self.path is None or self.bytes_in_file >= self.max_file_size:
                self._next_file()
            line = {"type": "MultiAgentBatch", "count": int(batch.env_steps()),
                    "policy_batches": {pid: batch_to_json_dict(with_behaviour_probs(b))
                                       for pid, b in batch.policy_batches.items()}}
            self.bytes_in_file += self._write_line(line)
        else:
            super().write(batch)

    def _open_file(self, path: str) -> None:
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in _close_file

    def _write_policy_batch(self, batch: SampleBatch, policy_id: str) -> int:
        line = {"type": "SampleBatch", **batch_to_json_dict(batch)}
        if policy_id != DEFAULT_POLICY_ID:
            line = {"type": "MultiAgentBatch", "count": int(batch.count),
                    "policy_batches": {policy_id: batch_to_json_dict(batch)}}
        return self._write_line(line)

    def _write_line(self, line: dict) -> int:
        text = json.dumps(line) + "\n"
        self._file.write(text)
        self._file.flush()
        return len(text)

    def _close_file(self) -> None:
        self._file.close()
        self._file = None
