"""SyncSamplesOptimizer: synchronous sampling into queue tables, then minibatch SGD.

One `step()`: broadcast the weights (one `ray.put`), let every worker sample a fragment and write
its postprocessed experience into the queue table of each policy that learns (`rollouts` for the
default policy, `rollouts_<policy_id>` for the others of a multi-agent config; repeating rounds
until at least `train_batch_size` env steps are in), read exactly the items written back through
`ReplayDataset` as one train batch per policy, and run `num_sgd_iter` epochs of
`sgd_minibatch_size` minibatches on it with that policy's own learner. The bulk data goes
worker -> replay server -> learner; the driver only sees counts and metrics. Policies outside
`policies_to_train` get no table and no learner: their weights never change. A trained policy
that declares no loss but has its own `learn_on_batch` (classic RLlib's hand-written policies)
gets its train batch once per step, every numeric postprocessed column in it, through that
method, as classic RLlib's SyncSamplesOptimizer handed it (`num_sgd_iter` and minibatches are
for declared losses).

A recurrent policy's items are padded sequences (see tfrl/rollout/replay_output.py), so its
train batch holds whole sequences with their initial states and `seq_lens`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import tensorflow as tf

from tfrl import errors
from tfrl.learner.minibatch_sgd import MinibatchSGD
from tfrl.learner.row_reader import RowReader
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.rollout_replay import (declare_replay_tables, numeric_columns,
                                             point_workers_at_replay, sample_round)
from tfrl.optimizers.settings import SyncSamplesSettings
from tfrl.policy.policy import Policy
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.replay_output import dummy_trajectory
from tfrl.rollout.settings import WorkerSettings

ROLLOUTS_TABLE = "rollouts"


class SyncSamplesOptimizer(PolicyOptimizer):
    """Config keys: those of SyncSamplesSettings (read once, here).

    Raises (constructor):
      InvalidConfigError: a missing, ill-typed or out-of-range key, named in the message.
    """

    uses_replay = True
    results_bring_episodes = True  # every sample summary (not a call per worker per iteration)

    def __init__(self, workers, config: Optional[dict] = None, replay=None,
                 strategy: tf.distribute.Strategy = None, **settings):
        super().__init__(workers, config, replay, **settings)
        config, replay = self.config, self.replay
        from replay import Table

        self.settings = SyncSamplesSettings.from_config(config)
        self.worker_settings = WorkerSettings.from_config(config)
        self.train_batch_size = self.settings.train_batch_size
        self.strategy = strategy or tf.distribute.get_strategy()
        local = workers.local_worker()
        self.policy_ids = list(local.policies_to_train)
        self.policies = {pid: self._learner_policy(pid) for pid in self.policy_ids}
        # policies with their own learn_on_batch: every numeric postprocessed column travels
        own_columns = {pid: numeric_columns(dummy_trajectory(
            policy, self.worker_settings.observation_filter))
            for pid, policy in self.policies.items() if not _declares_loss(policy)}
        queue_size = 4 * self.train_batch_size + 20_000
        self.address, self.tables = declare_replay_tables(
            workers, self.worker_settings, replay,
            lambda name, signature, _pid: Table.queue(name, queue_size, signature=signature),
            ROLLOUTS_TABLE, self.policy_ids, columns=own_columns)
        self.readers: Dict[str, RowReader] = {}
        self.sgds: Dict[str, MinibatchSGD] = {}
        for pid in self.policy_ids:
            dataset = replay.dataset(
                self.tables[pid][0], max_in_flight_samples_per_worker=min(self.train_batch_size, 2048),
                num_workers_per_iterator=1)
            self.readers[pid] = RowReader(dataset, block_rows=self._rows_per_fragment(pid),
                                          select=lambda sample: sample.data)
            if pid in own_columns:
                continue
            self.sgds[pid] = MinibatchSGD(self.policies[pid], self.strategy,
                                          self.settings.num_sgd_iter, self.settings.minibatch_size,
                                          jit_compile=self.settings.jit_compile_learner)
            # while the remote workers are still starting (pointing them at replay waits for them)
            self.sgds[pid].trace()
        point_workers_at_replay(workers, self.worker_settings, self.address, self.tables,
                                client_kwargs=replay.client_kwargs)
        self._writing_to_replay = True
        # the single-policy view (the only or first policy that learns)
        self.policy_id = self.policy_ids[0]
        self.policy = self.policies[self.policy_id]
        self.table = self.tables[self.policy_id][0]
        self.sgd = self.sgds.get(self.policy_id)  # None: a policy with its own learn_on_batch
        self.reader = self.readers[self.policy_id]

    def _rows_per_fragment(self, policy_id: str):
        """Items one worker's `sample()` writes for `policy_id`, when that is fixed (one step item
        per env step: truncated fragments of a single-agent env, feed-forward policy), else
        None. Reads come in blocks of one worker's fragment rather than of a whole round, so a
        round that lost a worker (its node died) still reads whole blocks."""
        local = self.workers.local_worker()
        if self.worker_settings.complete_episodes or local.offline_settings.reads_files:
            return None  # batches of any size: whole episodes, or recorded batches
        if local.multi_agent or local.get_policy(policy_id).is_recurrent():
            return None
        return self.worker_settings.num_envs_per_worker * self.worker_settings.rollout_fragment_length

    def _learner_policy(self, policy_id: str):
        """The policy that learns: the local worker's own, or (under a strategy other than the
        default) a copy built inside the strategy's scope that replaces it in the local worker.

        A policy that declares no loss is its own learner (its `learn_on_batch`).

        Raises:
          NotSupportedError: the policy declares no loss and implements no `learn_on_batch`,
            or it is a recurrent one (its items would be padded sequences, not rows).
        """
        local = self.workers.local_worker()
        policy = local.get_policy(policy_id)
        if not _declares_loss(policy):
            if type(policy).learn_on_batch is Policy.learn_on_batch:
                raise errors.NotSupportedError(
                    f"policy {policy_id!r} ({type(policy).__name__}) is in policies_to_train but "
                    "declares no loss (build_tf_policy or a TFPolicy subclass) and implements "
                    "no learn_on_batch: implement learn_on_batch(samples) (return {} to learn "
                    "nothing), or leave the policy out of multiagent.policies_to_train")
            if policy.is_recurrent():
                raise errors.NotSupportedError(
                    f"policy {policy_id!r} ({type(policy).__name__}) has its own "
                    "learn_on_batch and is recurrent: SyncSamplesOptimizer hands such policies "
                    "rows of feed-forward steps only; declare its loss (build_tf_policy) or "
                    "drive it with your own loop over workers.local_worker().sample()")
            return policy
        if self.strategy is tf.distribute.get_strategy():
            return policy
        with self.strategy.scope():
            learner = type(policy)(policy.observation_space, policy.action_space, policy.config)
        local.set_policy(policy_id, learner)
        return learner

    def activate(self) -> None:
        """Points the workers at this optimizer's tables again (after another strategy)."""
        if not self._writing_to_replay:
            point_workers_at_replay(self.workers, self.worker_settings, self.address, self.tables,
                                    client_kwargs=self.replay.client_kwargs)
            self._writing_to_replay = True

    def deactivate(self) -> None:
        """The workers stop writing into replay: their `sample()` returns batches again."""
        if self._writing_to_replay:
            self.workers.set_replay_output(None)
            self._writing_to_replay = False

    def step(self) -> dict:
        self.activate()
        with self.timer("sync_weights"):
            # not waited for: each worker sets the weights before its sample call runs. Only
            # the trained policies' weights change here (classic RLlib's TrainOneStep)
            weights_set = self.workers.sync_weights(
                self.workers.local_worker().policies_to_train,
                global_vars={"timestep": self.num_steps_sampled}, wait=False)
        with self.timer("sample"):
            steps, items = 0, {}
            while steps < self.train_batch_size:
                round_steps, episodes, written = sample_round(self.workers)
                steps += round_steps
                self._new_episodes.extend(episodes)
                for pid, n in written.items():
                    items[pid] = items.get(pid, 0) + n
            self.workers.gather(weights_set)  # done by now; raises what set_weights raised
        stats = {}
        for pid in self.policy_ids:
            n = items.get(pid, 0)
            if not n:
                continue  # no agent of this policy acted in these rounds
            with self.timer("load"):
                batch = self.readers[pid].read(n)
            if n < self.strategy.num_replicas_in_sync:
                continue  # too few items to give every replica one; read so the queue drains
            with self.timer("learn"):
                if pid in self.sgds:
                    stats[pid] = self.sgds[pid].learn_on_batch(batch)
                else:
                    stats[pid] = _own_learn_on_batch(self.policies[pid], batch)
        self.num_steps_sampled += steps
        self.num_steps_trained += steps * self.settings.num_sgd_iter
        for policy in self.policies.values():
            policy.on_global_var_update({"timestep": self.num_steps_sampled})
        self.learner_stats = stats
        return self.learner_stats

    def stop(self) -> None:
        self.replay.close_datasets()
        super().stop()


def _declares_loss(policy) -> bool:
    """Whether `policy` declares a loss that minibatch SGD runs (build_tf_policy, TFPolicy)."""
    return hasattr(policy, "loss_input_signature")


def _own_learn_on_batch(policy, columns: Dict[str, Any]) -> dict:
    """The learner stats of `policy.learn_on_batch` on the rows read (a SampleBatch of numpy
    columns): its `learner_stats` entry when it returns classic RLlib's nesting, else all."""
    import numpy as np
    import tree

    result = policy.learn_on_batch(SampleBatch(tree.map_structure(np.asarray, dict(columns))))
    result = result or {}
    return dict(result.get("learner_stats", result)) if isinstance(result, dict) else {}
