"""SyncReplayOptimizer: off-policy learning from a uniform or prioritized replay table (DQN).

Workers write postprocessed (e.g. n-step) transitions into the `replay` table; the learner is a
`MirroredLearner` reading per-replica batches through `ReplayDataset`. Learning starts when the
table holds `learning_starts` items (the table's rate limiter's minimum size), and the replay
ratio (samples per inserted step, `training_intensity`) is held by a `SampleToInsertRatio`
rate limiter: the driver trains exactly the batches the inserted steps pay for, and the limiter
guarantees no stream runs further ahead than its error buffer. With prioritized replay, the
importance weights (N * P(i))^-beta / max_j w_j are computed in the learner from each sample's
`SampleInfo` (probability, table size), with beta annealed linearly, and |TD error| + eps goes
back to the table as the new priority (`Client.mutate_priorities`).

The driver loop is pipelined so rollouts and learning overlap: with remote workers, the next
sampling round is launched (weights first, every `broadcast_interval` rounds, without waiting:
Ray runs one actor's calls in order) before the learner trains the batches the finished round
paid for, in one learner call of several gradient steps followed by one batched priority update.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tree

from tfrl.errors import InvalidConfigError
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.rollout_replay import (declare_replay_table, point_workers_at_replay,
                                             sample_round)
from tfrl.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch

REPLAY_TABLE = "replay"
_PROBABILITY = "_sample_probability"
_TABLE_SIZE = "_sample_table_size"


class SyncReplayOptimizer(PolicyOptimizer):
    """Config keys: train_batch_size, buffer_size, learning_starts, training_intensity (None:
    one train batch per sampling round), prioritized_replay, prioritized_replay_alpha,
    prioritized_replay_beta, final_prioritized_replay_beta,
    prioritized_replay_beta_annealing_timesteps, prioritized_replay_eps, num_learner_devices,
    broadcast_interval (sampling rounds between weight broadcasts to remote workers, default 1).

    Raises (constructor):
      InvalidConfigError: broadcast_interval below 1.
    """

    def __init__(self, workers, config: dict, replay, strategy: tf.distribute.Strategy = None):
        super().__init__(workers, config, replay)
        from replay import (Fifo, Prioritized, ReplaySample, SampleToInsertRatio, Table,
                            Uniform)

        from tfrl.learner import MirroredLearner
        from tfrl.learner.strategy import learner_strategy

        self.policy_id = DEFAULT_POLICY_ID
        self.broadcast_interval = int(config.get("broadcast_interval", 1))
        if self.broadcast_interval < 1:
            raise InvalidConfigError(
                f"broadcast_interval must be >= 1 (sampling rounds between weight broadcasts), got "
                f"{config.get('broadcast_interval')}.")
        self.train_batch_size = int(config["train_batch_size"])
        self.learning_starts = max(int(config.get("learning_starts", 1000)), 1)
        self.prioritized = bool(config.get("prioritized_replay", False))
        self.priority_eps = float(config.get("prioritized_replay_eps", 1e-6))
        samplers = max(workers.num_remote_workers(), 1)
        rows_per_round = samplers * int(config["num_envs_per_worker"]) * int(config["rollout_fragment_length"])
        intensity = config.get("training_intensity")
        self.samples_per_insert = float(intensity) if intensity else self.train_batch_size / rows_per_round
        strategy = strategy or learner_strategy(config.get("num_learner_devices", "auto"))
        replicas = strategy.num_replicas_in_sync
        per_replica_batch = max(self.train_batch_size // replicas, 1)
        in_flight = 2 * per_replica_batch
        error_buffer = max(2 * (in_flight * replicas + self.train_batch_size + rows_per_round * self.samples_per_insert),
                           2.0 * max(1.0, self.samples_per_insert))

        def make_table(signature):
            sampler = (Prioritized(config.get("prioritized_replay_alpha", 0.6)) if self.prioritized
                       else Uniform())
            return Table(REPLAY_TABLE, sampler=sampler, remover=Fifo(),
                         max_size=int(config.get("buffer_size", 50_000)),
                         rate_limiter=SampleToInsertRatio(self.samples_per_insert, self.learning_starts,
                                                          error_buffer),
                         signature=signature)

        local = workers.local_worker()
        template = local.get_policy(self.policy_id)
        self.address, self.table, signature = declare_replay_table(workers, config, replay,
                                                                    make_table, self.policy_id)
        self.learner = MirroredLearner(
            lambda: type(template)(template.observation_space, template.action_space, template.config),
            loss_fn=self._loss, strategy=strategy, steps_per_call=1)
        self.policy = self.learner.trainee
        local.set_policy(self.policy_id, self.policy)
        with strategy.scope():
            self.beta = tf.Variable(float(config.get("prioritized_replay_beta", 0.4)), trainable=False,
                                    name="prioritized_replay_beta")
        self.signature = self.policy.loss_input_signature
        table = self.table

        def dataset_fn(input_context):
            def with_info(sample):
                data = dict(sample.data)
                data[_PROBABILITY] = tf.cast(sample.info.probability, tf.float32)
                data[_TABLE_SIZE] = tf.cast(sample.info.table_size, tf.float32)
                return ReplaySample(sample.info, data)

            dataset = replay.dataset(table, max_in_flight_samples_per_worker=in_flight,
                                     num_workers_per_iterator=1)
            closers.append(dataset.replay_close)
            return dataset.batch(per_replica_batch, drop_remainder=True).map(with_info)

        closers = self._dataset_closers = []
        self.iterator = iter(self.learner.distribute_datasets_from_function(dataset_fn))
        # Traced now, while remote workers are still starting, rather than at the first step.
        self.learner.build(self.iterator)
        # A worker returns from sample() while the server may still be inserting its round (the
        # learner's reads wait for them in the rate limiter), so rollouts do not stall on a busy
        # server.
        point_workers_at_replay(workers, config, self.address, self.table, signature,
                                max_unacked_after_write=rows_per_round // samplers)
        self.num_train_steps = 0
        self._client = None
        self._pending = None  # refs of the sampling round in flight on the remote workers
        self._rounds_launched = 0

    def _loss(self, data):
        data = dict(data)
        probability = data.pop(_PROBABILITY)
        table_size = data.pop(_TABLE_SIZE)
        if self.prioritized:
            weights = tf.pow(table_size * probability, -self.beta)
            weights = weights / tf.reduce_max(weights)
        else:
            weights = tf.ones_like(probability)
        data[SampleBatch.PRIO_WEIGHTS] = weights
        batch = {k: tree.map_structure(lambda spec, x: tf.cast(x, spec.dtype), spec, data[k])
                 for k, spec in self.signature.items()}
        return self.policy.loss_and_stats(batch)

    def _update_priorities(self, outputs) -> None:
        """One mutate_priorities call for all steps of a learner call (a key sampled twice
        keeps its latest TD error)."""
        if not self.prioritized:
            return
        keys, td_errors = [], []
        for output in outputs:
            td_error = output.per_sample.get(SampleBatch.TD_ERROR)
            if output.info is None or td_error is None:
                continue
            keys.append(np.asarray(output.info.key).reshape(-1))
            td_errors.append(np.asarray(td_error, np.float64).reshape(-1))
        if not keys:
            return
        priorities = np.abs(np.concatenate(td_errors)) + self.priority_eps
        if self._client is None:
            self._client = self.replay.client()
        self._client.mutate_priorities(
            self.table, updates=dict(zip(np.concatenate(keys).tolist(), priorities.tolist())))

    def _anneal_beta(self) -> None:
        start = float(self.config.get("prioritized_replay_beta", 0.4))
        final = float(self.config.get("final_prioritized_replay_beta", start))
        horizon = max(int(self.config.get("prioritized_replay_beta_annealing_timesteps", 20_000)), 1)
        fraction = min(self.num_steps_sampled / horizon, 1.0)
        self.beta.assign(start + fraction * (final - start))

    def _launch_round(self) -> None:
        """Starts one sample() on every remote worker, after a weight broadcast every
        `broadcast_interval` rounds; nothing waits (each actor runs its calls in order)."""
        import ray

        workers = self.workers.remote_workers()
        global_vars = {"timestep": self.num_steps_sampled}
        with self.timer("sync_weights"):
            if self._rounds_launched % self.broadcast_interval == 0:
                weights = ray.put(self.workers.local_worker().get_weights([self.policy_id]))
                for worker in workers:
                    worker.set_weights.remote(weights, global_vars)
        self._rounds_launched += 1
        self._pending = [(worker, worker.sample.remote()) for worker in workers]

    def _finish_round(self):
        """Waits for the round in flight; returns (env steps, episodes). Failed workers are
        recreated by the WorkerSet and left out."""
        pending, self._pending = self._pending, None
        summaries = self.workers.gather(pending) if pending else []
        return (sum(s["env_steps"] for s in summaries),
                [e for s in summaries for e in s["episodes"]])

    def _sample(self):
        if not self.workers.remote_workers():
            steps, episodes = sample_round(self.workers)
            self.workers.local_worker().set_global_vars(
                {"timestep": self.num_steps_sampled + steps})
            return steps, episodes
        if self._pending is None:
            self._launch_round()
        steps, episodes = self._finish_round()
        self.workers.local_worker().set_global_vars({"timestep": self.num_steps_sampled + steps})
        self._launch_round()  # sampled while the learner trains on what is already stored
        return steps, episodes

    def step(self) -> dict:
        with self.timer("sample"):
            steps, episodes = self._sample()
        self.num_steps_sampled += steps
        self._new_episodes.extend(episodes)
        paid = max(self.num_steps_sampled - self.learning_starts, -1) + 1
        owed = int(paid * self.samples_per_insert // self.train_batch_size) - self.num_train_steps
        if owed > 0:
            self._anneal_beta()
            outputs = []
            with self.timer("learn"):
                while len(outputs) < owed:
                    taken = self.learner.train(self.iterator, num_steps=owed - len(outputs))
                    if not taken:
                        break
                    outputs.extend(taken)
            with self.timer("update_priorities"):
                self._update_priorities(outputs)
            self.num_train_steps += owed
            self.num_steps_trained += sum(o.batch_size for o in outputs)
            if outputs:
                from tfrl.learner import mean_stats

                self.learner_stats = {self.policy_id: mean_stats(outputs)}
        return self.learner_stats

    def drain(self) -> None:
        """Waits for the sampling round in flight and counts its steps and episodes."""
        if self._pending is not None:
            steps, episodes = self._finish_round()
            self.num_steps_sampled += steps
            self._new_episodes.extend(episodes)

    def save(self) -> dict:
        self.drain()
        return dict(super().save(), num_train_steps=self.num_train_steps)

    def restore(self, state: dict) -> None:
        super().restore(state)
        self.num_train_steps = state.get("num_train_steps", 0)

    def stop(self) -> None:
        try:
            self.drain()
        except Exception:  # noqa: BLE001 - stopping must not fail on a worker that died
            pass
        for close in self._dataset_closers:
            close()
        super().stop()
