"""SyncSamplesOptimizer: synchronous sampling into a queue table, then minibatch SGD.

One `step()`: broadcast the weights (one `ray.put`), let every worker sample a fragment and write
its postprocessed steps into the `rollouts` queue table (repeating rounds until at least
`train_batch_size` steps are in), read exactly those steps back through `ReplayDataset` as one
train batch, and run `num_sgd_iter` epochs of `sgd_minibatch_size` minibatches on it. The bulk
data goes worker -> replay server -> learner; the driver only sees counts and metrics.
"""
from __future__ import annotations

import tensorflow as tf

from tfrl.optimizers.minibatch_sgd import MinibatchSGD, RowReader
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.rollout_replay import connect_workers_to_replay, sample_round
from tfrl.policy.sample_batch import DEFAULT_POLICY_ID

ROLLOUTS_TABLE = "rollouts"


class SyncSamplesOptimizer(PolicyOptimizer):
    """Config keys: train_batch_size, num_sgd_iter (1), sgd_minibatch_size (train_batch_size)."""

    def __init__(self, workers, config: dict, replay, strategy: tf.distribute.Strategy = None):
        super().__init__(workers, config, replay)
        from replay import Table

        self.train_batch_size = int(config["train_batch_size"])
        self.policy_id = DEFAULT_POLICY_ID
        self.strategy = strategy or tf.distribute.get_strategy()
        self.policy = self._learner_policy()
        queue_size = 4 * self.train_batch_size + 20_000
        self.address, self.table, _ = connect_workers_to_replay(
            workers, config, replay, lambda sig: Table.queue(ROLLOUTS_TABLE, queue_size, signature=sig),
            self.policy_id)
        dataset = replay.dataset(
            self.table, max_in_flight_samples_per_worker=min(self.train_batch_size, 2048),
            num_workers_per_iterator=1)
        self._close_dataset = dataset.replay_close
        dataset = dataset.map(lambda sample: sample.data)
        self.reader = RowReader(dataset, block_rows=self._rows_per_round())
        self.sgd = MinibatchSGD(self.policy, self.strategy, config.get("num_sgd_iter", 1),
                                config.get("sgd_minibatch_size") or self.train_batch_size)

    def _rows_per_round(self):
        """Steps one sampling round writes, when that is fixed (truncated fragments), else None."""
        if self.config.get("batch_mode", "truncate_episodes") != "truncate_episodes":
            return None
        samplers = max(len(self.workers.remote_workers()), 1)
        return samplers * int(self.config["num_envs_per_worker"]) * int(self.config["rollout_fragment_length"])

    def _learner_policy(self):
        """The policy that learns: the local worker's own, or (under a strategy other than the
        default) a copy built inside the strategy's scope that replaces it in the local worker."""
        local = self.workers.local_worker()
        policy = local.get_policy(self.policy_id)
        if self.strategy is tf.distribute.get_strategy():
            return policy
        with self.strategy.scope():
            learner = type(policy)(policy.observation_space, policy.action_space, policy.config)
        local.set_policy(self.policy_id, learner)
        return learner

    def step(self) -> dict:
        with self.timer("sync_weights"):
            self.workers.sync_weights(global_vars={"timestep": self.num_steps_sampled})
        with self.timer("sample"):
            steps = 0
            while steps < self.train_batch_size:
                round_steps, episodes = sample_round(self.workers)
                steps += round_steps
                self._new_episodes.extend(episodes)
        with self.timer("load"):
            batch = self.reader.read(steps)
        with self.timer("learn"):
            stats = self.sgd.learn(batch)
        self.num_steps_sampled += steps
        self.num_steps_trained += steps * self.sgd.num_sgd_iter
        self.policy.on_global_var_update({"timestep": self.num_steps_sampled})
        self.learner_stats = {self.policy_id: stats}
        return self.learner_stats

    def stop(self) -> None:
        self._close_dataset()
        super().stop()
