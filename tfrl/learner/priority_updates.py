"""Turning a learner step's per-sample TD errors into replay priority updates.

This is the feedback arrow "priorities -> Client.mutate_priorities": a
`PriorityUpdater` is a `MirroredLearner` `on_step` hook. For each step it reads the sampled
items' keys from the step's `SampleInfo` and their TD errors from the loss's per-sample
outputs, and sends `priority = |td_error| + epsilon` for every key to the replay table (as in
prioritized experience replay; the table's sampler applies its priority exponent).
See docs/architecture.md, "Data path".
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from tfrl import errors


class PriorityUpdater:
    """An `on_step` hook updating priorities of the sampled items.

    Args:
      client: a `replay.Client` (or anything with `mutate_priorities(table, updates)`).
      table: the prioritized table the dataset samples.
      per_sample_key: the name of the per-sample output holding TD errors.
      epsilon: added to |td_error| so no item's priority reaches zero.
    """

    def __init__(self, client, table: str, per_sample_key: str = "td_error", epsilon: float = 1e-6):
        if not epsilon >= 0:
            raise errors.InvalidConfigError(f"epsilon must be >= 0, got {epsilon}")
        self.client = client
        self.table = table
        self.per_sample_key = per_sample_key
        self.epsilon = float(epsilon)
        self.num_updates = 0

    def priorities(self, step_output) -> Dict[int, float]:
        """Item key -> new priority for one `StepOutput` (a key sampled twice keeps its last).

        Raises:
          InvalidConfigError: the step carries no SampleInfo (the dataset does not yield
            ReplaySample) or no per-sample output named `per_sample_key`.
        """
        info = step_output.info
        if info is None or not hasattr(info, "key"):
            raise errors.InvalidConfigError(
                "the learner's batches carry no SampleInfo; feed it a replay.ReplayDataset (elements "
                "ReplaySample(info, data)) to update priorities")
        if self.per_sample_key not in step_output.per_sample:
            raise errors.InvalidConfigError(
                f"the loss returned no per-sample output {self.per_sample_key!r} (it has "
                f"{sorted(step_output.per_sample)}); return it from loss_and_stats or set per_sample_key")
        td_errors = np.abs(np.asarray(step_output.per_sample[self.per_sample_key], np.float64)).reshape(-1)
        keys = np.asarray(info.key).reshape(-1)
        if len(keys) != len(td_errors):
            raise errors.InvalidConfigError(
                f"{len(td_errors)} values of {self.per_sample_key!r} for {len(keys)} sampled items; "
                "the per-sample output needs one value per sample")
        return {int(k): float(p) for k, p in zip(keys, td_errors + self.epsilon)}

    def __call__(self, step_output) -> None:
        """Sends the step's priority updates.

        Raises: as `priorities`, and replay errors of `mutate_priorities`.
        """
        updates = self.priorities(step_output)
        self.client.mutate_priorities(self.table, updates=updates)
        self.num_updates += len(updates)
