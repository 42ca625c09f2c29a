"""Rollout operators of execution plans (classic `ray.rllib.execution.rollout_ops`), in the
execution layer: where a plan's sample batches come from, and how they are selected, merged
and normalised before training.
"""
from __future__ import annotations

import logging
import time
from typing import List, Optional

import numpy as np

from tfrl.execution.local_iterator import LocalIterator
from tfrl.execution.metrics_context import (SAMPLE_TIMER, STEPS_SAMPLED_COUNTER, SharedMetrics,
                                            get_shared_metrics)
from tfrl.execution.parallel_iterator import ParallelIterator
from tfrl.policy.sample_batch import (DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch,
                                      concat_samples)

logger = logging.getLogger(__name__)

ROLLOUT_MODES = ("bulk_sync", "async", "raw")


def check_sample_batch(batch) -> None:
    """Raises:
      ValueError: `batch` is neither a SampleBatch nor a MultiAgentBatch.
    """
    if not isinstance(batch, (SampleBatch, MultiAgentBatch)):
        raise ValueError(f"expected a SampleBatch or MultiAgentBatch, got "
                         f"{type(batch).__name__}: {batch!r}")


def _report_timesteps(batch):
    get_shared_metrics().counters[STEPS_SAMPLED_COUNTER] += batch.count
    return batch


def ParallelRollouts(workers, *, mode: str = "bulk_sync", num_async: int = 1):
    """The sample batches of `workers` (the weights are broadcast first). Without remote
    workers the local worker samples, one fragment per item, whatever the mode. With remote
    workers: "bulk_sync" gives one batch per sampling round (every worker's fragment,
    concatenated), "async" each worker's fragment as it finishes (`num_async` calls in
    flight per worker), "raw" the `ParallelIterator` itself (the caller gathers and counts).
    Every item but raw ones adds its env steps (`batch.count`) to the num_steps_sampled counter.

    Raises:
      ValueError: an unknown mode.
      WorkerCrashedError: the remote workers failed to start.
    """
    if mode not in ROLLOUT_MODES:
        raise ValueError(f"mode must be one of {', '.join(ROLLOUT_MODES)}; got {mode!r}")
    workers.sync_weights()
    if not workers.remote_workers():
        local = workers.local_worker()

        def sampler(_timeout=None):
            while True:
                yield local.sample()

        return LocalIterator(sampler, SharedMetrics(),
                             name="ParallelRollouts[local]").for_each(_report_timesteps)
    rollouts = ParallelIterator(workers)
    if mode == "bulk_sync":
        return (rollouts.batch_across_shards()
                .for_each(concat_samples)
                .for_each(_report_timesteps))
    if mode == "async":
        return rollouts.gather_async(num_async=num_async).for_each(_report_timesteps)
    return rollouts


class ConcatBatches:
    """For `.combine()`: holds batches until they add up to `min_batch_size` env steps, then
    gives them as one batch (and nothing before). Pushes the time it took to the sample timer.
    """

    def __init__(self, min_batch_size: int):
        self.min_batch_size = min_batch_size
        self.buffer: list = []
        self.count = 0
        self.batch_start_time: Optional[float] = None

    def _on_fetch_start(self) -> None:
        if self.batch_start_time is None:
            self.batch_start_time = time.perf_counter()

    def __call__(self, batch) -> list:
        """Raises:
          ValueError: `batch` is not a SampleBatch or MultiAgentBatch.
        """
        check_sample_batch(batch)
        self.buffer.append(batch)
        self.count += batch.count
        if self.count < self.min_batch_size:
            return []
        if self.count > 2 * self.min_batch_size:
            logger.info("ConcatBatches collected %d steps for a minimum of %d (many workers, or "
                        "whole episodes per fragment)", self.count, self.min_batch_size)
        out = concat_samples(self.buffer)
        timer = get_shared_metrics().timers[SAMPLE_TIMER]
        timer.push(time.perf_counter() - (self.batch_start_time or time.perf_counter()))
        timer.push_units_processed(self.count)
        self.buffer, self.count, self.batch_start_time = [], 0, None
        return [out]


class SelectExperiences:
    """For `.for_each()`: a MultiAgentBatch cut down to the batches of `policy_ids` (the env
    steps stay those of the whole batch); a SampleBatch goes through unchanged.

    Raises (constructor):
      TypeError: policy_ids is not a list.
    """

    def __init__(self, policy_ids: List[str]):
        if not isinstance(policy_ids, list):
            raise TypeError(f"SelectExperiences takes a list of policy ids, got {policy_ids!r}")
        self.policy_ids = policy_ids

    def __call__(self, samples):
        """Raises:
          ValueError: `samples` is not a SampleBatch or MultiAgentBatch.
        """
        check_sample_batch(samples)
        if isinstance(samples, MultiAgentBatch):
            return MultiAgentBatch({pid: b for pid, b in samples.policy_batches.items()
                                    if pid in self.policy_ids}, samples.count)
        return samples


def standardized(values: np.ndarray) -> np.ndarray:
    """(values - mean) / max(std, 1e-4) (as float32)."""
    values = np.asarray(values, np.float32)
    return (values - values.mean()) / max(1e-4, float(values.std()))


class StandardizeFields:
    """For `.for_each()`: the given columns of every policy's batch standardised to zero mean
    and unit deviation (in place)."""

    def __init__(self, fields: List[str]):
        self.fields = list(fields)

    def __call__(self, samples):
        """Raises:
          ValueError: `samples` is not a SampleBatch or MultiAgentBatch.
          KeyError: a batch lacks one of the fields.
        """
        check_sample_batch(samples)
        batches = (samples.policy_batches if isinstance(samples, MultiAgentBatch)
                   else {DEFAULT_POLICY_ID: samples})
        for batch in batches.values():
            if not batch.count:
                continue
            for field in self.fields:
                batch[field] = standardized(batch[field])
        return samples
