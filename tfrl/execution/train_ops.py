"""Training operators of execution plans (classic `ray.rllib.execution.train_ops`), in the
execution layer: learning on a plan's batches with the local worker's policies, and target
network updates.

The policies learn in the driver's process, the local worker's own policy objects (whose
weights checkpoints save). A policy that declares its loss (build_tf_policy, TFPolicy) trains
`num_sgd_iter` epochs of `sgd_minibatch_size` minibatches through tfrl's `MinibatchSGD` (the
on-policy optimizers' learner) when more than one step is asked for, else one
`learn_on_batch` step; a policy with its own `learn_on_batch` gets that, once per minibatch.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfrl.execution.metrics_context import (LAST_TARGET_UPDATE_TS, LEARN_ON_BATCH_TIMER,
                                            LEARNER_INFO, NUM_TARGET_UPDATES,
                                            STEPS_SAMPLED_COUNTER, STEPS_TRAINED_COUNTER,
                                            WORKER_UPDATE_TIMER, get_shared_metrics, global_vars)
from tfrl.execution.rollout_ops import check_sample_batch
from tfrl.optimizers.policy_optimizer import nest_model_metrics
from tfrl.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch

# MinibatchSGD's minibatch size meaning "the whole train batch" (one minibatch per epoch)
_WHOLE_BATCH = 2 ** 31 - 1


def scalar_stats(stats: dict) -> dict:
    """The scalar entries of a policy's learn stats (per-row arrays such as td_error left out),
    as floats; a nested classic "learner_stats" dict is unpacked."""
    if isinstance(stats.get("learner_stats"), dict):
        stats = stats["learner_stats"]
    out = {}
    for key, value in stats.items():
        if np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.number):
            out[key] = float(value)
    return out


class TrainOneStep:
    """For `.for_each()`: trains `policies` (default: the local worker's policies_to_train) on
    their part of each batch, then sends their weights, and the plan's timestep, to the remote
    workers. Returns (batch, {policy_id: stats}); the stats include per-row arrays the loss
    returns (DQN's td_error, for priorities). Adds the batch's env steps to num_steps_trained
    and puts the scalar stats under info["learner"] (a model's metrics() nested under
    "model", as policy optimizers report them).

    Args:
      workers: the trainer's WorkerSet.
      policies: ids of the policies to train.
      num_sgd_iter: epochs over the batch.
      sgd_minibatch_size: rows per minibatch (0: the whole batch).
    """

    def __init__(self, workers, policies: Sequence[str] = (), num_sgd_iter: int = 1,
                 sgd_minibatch_size: int = 0):
        self.workers = workers
        self.policies = list(policies or workers.local_worker().policies_to_train)
        self.num_sgd_iter = int(num_sgd_iter)
        self.sgd_minibatch_size = int(sgd_minibatch_size or 0)
        self._sgds: Dict[str, object] = {}

    def _minibatch_sgd(self, policy_id: str, policy):
        from tfrl.learner.minibatch_sgd import MinibatchSGD

        sgd = self._sgds.get(policy_id)
        if sgd is None or sgd.policy is not policy:
            sgd = self._sgds[policy_id] = MinibatchSGD(
                policy, tf.distribute.get_strategy(), self.num_sgd_iter,
                self.sgd_minibatch_size or _WHOLE_BATCH)
        return sgd

    def _learn(self, policy_id: str, policy, batch) -> dict:
        if self.num_sgd_iter <= 1 and self.sgd_minibatch_size <= 0:
            return dict(policy.learn_on_batch(batch) or {})
        if hasattr(policy, "loss_input_signature"):
            return self._minibatch_sgd(policy_id, policy).learn_on_batch(batch)
        stats: dict = {}
        size = self.sgd_minibatch_size or batch.count
        for _ in range(self.num_sgd_iter):
            for minibatch in batch.minibatches(size):
                stats = dict(policy.learn_on_batch(minibatch) or {})
        return stats

    def __call__(self, batch):
        """Raises:
          ValueError: `batch` is not a SampleBatch or MultiAgentBatch.
          InvalidBatchError: a policy's batch lacks a column its loss reads.
        """
        check_sample_batch(batch)
        metrics = get_shared_metrics()
        local = self.workers.local_worker()
        batches = (batch.policy_batches if isinstance(batch, MultiAgentBatch)
                   else {DEFAULT_POLICY_ID if DEFAULT_POLICY_ID in local.policy_map
                         else self.policies[0]: batch})
        info = {}
        learn_timer = metrics.timers[LEARN_ON_BATCH_TIMER]
        with learn_timer:
            for policy_id in self.policies:
                policy_batch = batches.get(policy_id)
                if policy_batch is None or not policy_batch.count:
                    continue
                info[policy_id] = self._learn(policy_id, local.get_policy(policy_id), policy_batch)
            learn_timer.push_units_processed(batch.count)
        # as policy optimizers report them: a model's metrics() under <policy>/model
        metrics.info[LEARNER_INFO] = nest_model_metrics(
            {pid: scalar_stats(stats) for pid, stats in info.items()})
        metrics.counters[STEPS_TRAINED_COUNTER] += batch.count
        timestep = global_vars()
        if self.workers.num_remote_workers():
            with metrics.timers[WORKER_UPDATE_TIMER]:
                self.workers.sync_weights(self.policies, global_vars=timestep)
        else:
            local.set_global_vars(timestep)
        return batch, info


class UpdateTargetNetwork:
    """For `.for_each()`: once more than `target_update_freq` env steps were sampled (trained,
    with `by_steps_trained`) since the last update, `update_target()` of `policies` (default:
    the local worker's policies_to_train) and counts it in num_target_updates. Passes the
    item on.

    Raises (when called):
      AttributeError: a policy has no target network (`update_target`).
    """

    def __init__(self, workers, target_update_freq: int, by_steps_trained: bool = False,
                 policies: Optional[List[str]] = None):
        self.workers = workers
        self.target_update_freq = target_update_freq
        self.metric = STEPS_TRAINED_COUNTER if by_steps_trained else STEPS_SAMPLED_COUNTER
        self.policies = list(policies or workers.local_worker().policies_to_train)

    def __call__(self, item):
        metrics = get_shared_metrics()
        now = metrics.counters[self.metric]
        if now - metrics.counters[LAST_TARGET_UPDATE_TS] > self.target_update_freq:
            local = self.workers.local_worker()
            for policy_id in self.policies:
                local.get_policy(policy_id).update_target()
            metrics.counters[NUM_TARGET_UPDATES] += 1
            metrics.counters[LAST_TARGET_UPDATE_TS] = now
        return item
