"""Classic `ray.rllib.evaluation.sample_batch_builder`: `SampleBatchBuilder`, which collects rows
added one at a time (`add_values(t=..., obs=..., ...)`) or as batches and builds a tfrl
`SampleBatch` of them, e.g. to record hand-made experiences with `offline.json_writer.JsonWriter`.

Columns become numpy arrays (float64 values float32, as classic RLlib stored them; `infos` an
object array). A classic `dones` column is kept, and when the rows give no `terminateds` it is
split into gymnasium's `terminateds` / `truncateds` (a done whose info says
`TimeLimit.truncated` is a truncation), which tfrl's batches carry; pass `terminateds=` and
`truncateds=` yourself to record gymnasium's two flags as they are.
"""
from __future__ import annotations

import collections
from typing import Any, Dict, List, Optional

import numpy as np

from tfrl.env.classic_api import TIME_LIMIT_TRUNCATED
from tfrl.policy.sample_batch import SampleBatch

DONES = "dones"


def _column(name: str, values: List[Any]) -> np.ndarray:
    if name == SampleBatch.INFOS:
        column = np.empty(len(values), dtype=object)
        column[:] = values
        return column
    array = np.asarray(values)
    return array.astype(np.float32) if array.dtype == np.float64 else array


class SampleBatchBuilder:
    """Rows of one agent collected into a SampleBatch (module docstring)."""

    def __init__(self):
        self.buffers: Dict[str, List[Any]] = collections.defaultdict(list)
        self.count = 0

    def add_values(self, **values: Any) -> None:
        """Adds one row: one value per column."""
        for name, value in values.items():
            self.buffers[name].append(value)
        self.count += 1

    def add_batch(self, batch: SampleBatch) -> None:
        """Adds every row of `batch`."""
        for name, column in batch.items():
            self.buffers[name].extend(list(column))
        self.count += batch.count

    def build_and_reset(self, episode: Optional[Any] = None) -> SampleBatch:
        """The SampleBatch of the rows added so far; the builder starts empty again.
        `episode` is accepted for classic calls and unused."""
        columns = {name: _column(name, values) for name, values in self.buffers.items()}
        if DONES in columns and SampleBatch.TERMINATEDS not in columns:
            dones = columns[DONES].astype(bool)
            infos = columns.get(SampleBatch.INFOS)
            truncated = np.array(
                [isinstance(info, dict) and bool(info.get(TIME_LIMIT_TRUNCATED, False))
                 for info in infos] if infos is not None else np.zeros(len(dones), bool),
                dtype=bool) & dones
            columns[SampleBatch.TERMINATEDS] = dones & ~truncated
            columns[SampleBatch.TRUNCATEDS] = truncated
        batch = SampleBatch(columns)
        self.buffers = collections.defaultdict(list)
        self.count = 0
        return batch


__all__ = ["SampleBatchBuilder"]
