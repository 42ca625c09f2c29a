"""`LocalReplayBuffer`: an execution plan's replay buffer in the driver's memory (classic
`ray.rllib.execution.replay_buffer.LocalReplayBuffer`), in the execution layer.

One buffer per policy ("independent" replay: each policy samples its own rows). Rows are held
as (batch, row) references into the stored batches, in a ring of `buffer_size` slots; which row
is drawn is chosen by the selectors of tfrl's replay package (`replay.selectors.Prioritized`, a
sum tree with exponent `prioritized_replay_alpha`; alpha 0 draws uniformly), so sampling and
priority updates are O(log n). A new row gets the batch's "weights" column as its priority when
it has one (worker-side priorities), else the highest priority seen so far.

Importance weights are (N * P(i))^-beta, divided by their maximum within the replayed batch
(classic RLlib divided by the maximum over the whole buffer, from its minimum-probability tree;
the sum tree here has none). Trainers with a policy optimizer use the replay service instead
(tfrl/optimizers/sync_replay_optimizer.py); this buffer is for execution plans.
"""
from __future__ import annotations

import collections
from typing import Dict, List, Optional, Tuple

import numpy as np

from replay.selectors import Prioritized
from tfrl import errors
from tfrl.execution.metrics_context import Timer
from tfrl.policy.sample_batch import (DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch,
                                      concat_samples)

BATCH_INDEXES = "batch_indexes"


class _PolicyRows:
    """One policy's ring of rows and its selector."""

    def __init__(self, capacity: int, alpha: float):
        self.capacity = capacity
        self.selector = Prioritized(priority_exponent=alpha)
        self.slots: List[Optional[Tuple[SampleBatch, int]]] = [None] * capacity
        self.next_key = 0
        self.max_priority = 1.0

    def __len__(self) -> int:
        return len(self.selector)

    def add(self, batch: SampleBatch) -> None:
        priorities = (np.asarray(batch[SampleBatch.PRIO_WEIGHTS], np.float64)
                      if SampleBatch.PRIO_WEIGHTS in batch else None)
        for row in range(batch.count):
            key = self.next_key
            self.next_key += 1
            slot = key % self.capacity
            if self.slots[slot] is not None:
                self.selector.delete(key - self.capacity)  # the oldest row goes
            self.slots[slot] = (batch, row)
            priority = self.max_priority if priorities is None else float(priorities[row])
            self.selector.insert(key, priority)

    def sample(self, n: int, beta: float) -> SampleBatch:
        drawn = [self.selector.sample() for _ in range(n)]
        size = len(self.selector)
        by_batch: Dict[int, list] = collections.OrderedDict()
        for key, probability in drawn:
            batch, row = self.slots[key % self.capacity]
            by_batch.setdefault(id(batch), [batch, [], [], []])
            entry = by_batch[id(batch)]
            entry[1].append(row)
            entry[2].append(key)
            entry[3].append(probability)
        parts = [batch.take(np.asarray(rows)) for batch, rows, _, _ in by_batch.values()]
        keys = np.concatenate([np.asarray(k, np.int64) for _, _, k, _ in by_batch.values()])
        probabilities = np.concatenate([np.asarray(p, np.float64)
                                        for _, _, _, p in by_batch.values()])
        weights = (size * probabilities) ** (-beta)
        weights = weights / weights.max()
        out = concat_samples(parts)
        out[SampleBatch.PRIO_WEIGHTS] = weights.astype(np.float32)
        out[BATCH_INDEXES] = keys
        return out

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        for key, priority in zip(np.asarray(keys).tolist(), np.asarray(priorities).tolist()):
            slot = key % self.capacity
            if key < self.next_key - self.capacity or self.slots[slot] is None:
                continue  # evicted since it was replayed
            self.selector.update(key, priority)
            self.max_priority = max(self.max_priority, priority)


class LocalReplayBuffer:
    """Per-policy replay in the driver.

    Args:
      num_shards: classic RLlib's shard count; this buffer holds 1/num_shards of the capacity
        and of `learning_starts` (one shard of a sharded buffer).
      learning_starts: env steps to add before `replay()` returns anything.
      buffer_size: rows held per policy (the oldest go first).
      replay_batch_size: rows per policy in each replayed batch.
      prioritized_replay_alpha: priority exponent (0: uniform).
      prioritized_replay_beta: importance-weight exponent.
      prioritized_replay_eps: added to |TD error| for a new priority.
      replay_mode: "independent" only.
      replay_sequence_length: 1 only.

    Raises (constructor):
      InvalidConfigError: num_shards, buffer_size or replay_batch_size below 1, or alpha/beta
        negative.
      NotSupportedError: replay_mode "lockstep" or replay_sequence_length above 1.
    """

    def __init__(self, num_shards: int, learning_starts: int, buffer_size: int,
                 replay_batch_size: int, prioritized_replay_alpha: float = 0.6,
                 prioritized_replay_beta: float = 0.4, prioritized_replay_eps: float = 1e-6,
                 replay_mode: str = "independent", replay_sequence_length: int = 1):
        if num_shards < 1 or buffer_size < num_shards or replay_batch_size < 1:
            raise errors.InvalidConfigError(
                f"LocalReplayBuffer needs num_shards >= 1, buffer_size >= num_shards and "
                f"replay_batch_size >= 1; got {num_shards}, {buffer_size}, {replay_batch_size}")
        if prioritized_replay_alpha < 0 or prioritized_replay_beta < 0:
            raise errors.InvalidConfigError(
                "prioritized_replay_alpha and prioritized_replay_beta must be >= 0")
        if replay_mode != "independent":
            raise errors.NotSupportedError(
                f"LocalReplayBuffer: replay_mode {replay_mode!r} is not supported; tfrl's "
                "execution plans replay each policy independently ('independent')")
        if replay_sequence_length != 1:
            raise errors.NotSupportedError(
                "LocalReplayBuffer replays single rows (replay_sequence_length=1); recurrent "
                "replay goes through the replay service (R2D2-style tables)")
        self.replay_starts = learning_starts // num_shards
        self.buffer_size = buffer_size // num_shards
        self.replay_batch_size = replay_batch_size
        self.prioritized_replay_alpha = prioritized_replay_alpha
        self.prioritized_replay_beta = prioritized_replay_beta
        self.prioritized_replay_eps = prioritized_replay_eps
        self.replay_buffers: Dict[str, _PolicyRows] = {}
        self.num_added = 0
        self.add_batch_timer = Timer()
        self.replay_timer = Timer()
        self.update_priorities_timer = Timer()

    def __bool__(self) -> bool:
        return True  # classic operators test `if local_buffer:` (an empty buffer is still one)

    def __len__(self) -> int:
        return sum(len(rows) for rows in self.replay_buffers.values())

    def add_batch(self, batch) -> None:
        """Adds every row of `batch` (a SampleBatch: the default policy's) to its policy's
        buffer; counts its env steps toward learning_starts.

        Raises:
          ValueError: `batch` is neither a SampleBatch nor a MultiAgentBatch.
        """
        if isinstance(batch, SampleBatch):
            batch = MultiAgentBatch({DEFAULT_POLICY_ID: batch}, batch.count)
        if not isinstance(batch, MultiAgentBatch):
            raise ValueError(f"add_batch takes a SampleBatch or MultiAgentBatch, got "
                             f"{type(batch).__name__}")
        with self.add_batch_timer:
            for policy_id, policy_batch in batch.policy_batches.items():
                if not policy_batch.count:
                    continue
                if policy_id not in self.replay_buffers:
                    self.replay_buffers[policy_id] = _PolicyRows(
                        self.buffer_size, self.prioritized_replay_alpha)
                self.replay_buffers[policy_id].add(policy_batch.copy())
        self.num_added += batch.count

    def replay(self) -> Optional[MultiAgentBatch]:
        """A MultiAgentBatch of `replay_batch_size` rows per policy (with "weights", the
        importance weights, and "batch_indexes", the rows' keys for `update_priorities`), or
        None before `learning_starts` env steps were added."""
        if self.num_added < self.replay_starts or not self.replay_buffers:
            return None
        with self.replay_timer:
            samples = {pid: rows.sample(self.replay_batch_size, self.prioritized_replay_beta)
                       for pid, rows in self.replay_buffers.items()}
        return MultiAgentBatch(samples, self.replay_batch_size)

    def update_priorities(self, prio_dict: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> None:
        """New priorities |td_error| + eps for rows replayed earlier: {policy_id:
        (batch_indexes, td_errors)}. Rows evicted since are skipped.

        Raises:
          KeyError: a policy id this buffer holds no rows of.
        """
        with self.update_priorities_timer:
            for policy_id, (batch_indexes, td_errors) in prio_dict.items():
                priorities = np.abs(np.asarray(td_errors, np.float64)) + self.prioritized_replay_eps
                self.replay_buffers[policy_id].update_priorities(batch_indexes, priorities)

    def stats(self, debug: bool = False) -> dict:
        """Timings and, per policy, the rows held and added."""
        out = {"add_batch_time_ms": round(1000 * self.add_batch_timer.mean, 3),
               "replay_time_ms": round(1000 * self.replay_timer.mean, 3),
               "update_priorities_time_ms": round(1000 * self.update_priorities_timer.mean, 3)}
        for policy_id, rows in self.replay_buffers.items():
            out[f"policy_{policy_id}"] = {"num_entries": len(rows), "added_count": rows.next_key}
        return out
