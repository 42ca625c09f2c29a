"""SyncReplayOptimizer: off-policy learning from a uniform or prioritized replay table (DQN).

Workers write postprocessed (e.g. n-step) transitions into the `replay` table; the learner is a
`MirroredLearner` reading per-replica batches through `ReplayDataset`. Learning starts when the
table holds `learning_starts` items (the table's rate limiter's minimum size), and the replay
ratio (samples per inserted step, `training_intensity`) is held by a `SampleToInsertRatio`
rate limiter: the driver trains exactly the batches the inserted steps pay for, and the limiter
guarantees no stream runs further ahead than its error buffer. When the workers read recorded
files (`input`), a round inserts whatever batches were recorded (whole episodes, say), which an
error buffer sized for `rollout_fragment_length` would block until the learner samples, and the
learner runs after the round in the same loop: those tables have a `MinSize` limiter only, and
the driver's own count of paid-for batches keeps the ratio. With prioritized replay, the
importance weights (N * P(i))^-beta / max_j w_j are computed in the learner from each sample's
`SampleInfo` (probability, table size), with beta annealed linearly, and |TD error| + eps goes
back to the table as the new priority (`Client.mutate_priorities`).

Multi-agent: every policy in `policies_to_train` has its own lane: its own table (`replay` for
the default policy, `replay_<policy_id>` for the others), rate limiter, dataset, learner and
train-step count, paid for by the items inserted into its own table. Policies outside
`policies_to_train` get no table and no learner: their weights never change.

The driver loop is pipelined so rollouts and learning overlap: with remote workers, the next
sampling round is launched (weights first, every `broadcast_interval` rounds, without waiting:
Ray runs one actor's calls in order) before the learner trains the batches the finished round
paid for, in one learner call of several gradient steps followed by one batched priority update.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf
import tree

from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.rollout_replay import (declare_replay_tables, point_workers_at_replay,
                                             sample_round, summarize_round)
from tfrl.optimizers.settings import LearnerSettings, SyncReplaySettings
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.settings import WorkerSettings
from tfrl.utils.tf_ops import assign_scalar

REPLAY_TABLE = "replay"
_PROBABILITY = "_sample_probability"
_TABLE_SIZE = "_sample_table_size"


class _ReplayLane:
    """What one learning policy has: its table, learner (whose trainee is the policy that
    learns), dataset iterator, importance-weight exponent and counters."""

    def __init__(self, policy_id: str, table: str, samples_per_insert: float):
        self.policy_id = policy_id
        self.table = table
        self.samples_per_insert = samples_per_insert
        self.learner = None
        self.policy = None
        self.iterator = None
        self.beta = None
        self.beta_value = None  # what was last assigned to `beta` through this lane
        self.signature = None
        self.items_inserted = 0
        self.num_train_steps = 0


class SyncReplayOptimizer(PolicyOptimizer):
    """Config keys: those of SyncReplaySettings and LearnerSettings (read once, here).

    Raises (constructor):
      InvalidConfigError: a missing, ill-typed or out-of-range key (e.g. broadcast_interval
        below 1), named in the message.
    """

    uses_replay = True

    def __init__(self, workers, config: Optional[dict] = None, replay=None,
                 strategy: tf.distribute.Strategy = None, **settings):
        super().__init__(workers, config, replay, **settings)
        config, replay = self.config, self.replay
        from replay import Fifo, MinSize, Prioritized, SampleToInsertRatio, Table, Uniform

        from tfrl.offline.settings import OfflineSettings

        from tfrl.learner.strategy import learner_strategy

        self.settings = settings = SyncReplaySettings.from_config(config)
        self.worker_settings = WorkerSettings.from_config(config)
        learner_settings = LearnerSettings.from_config(config)
        self.broadcast_interval = settings.broadcast_interval
        self.train_batch_size = settings.train_batch_size
        self.learning_starts = max(settings.learning_starts, 1)
        self.prioritized = settings.prioritized_replay
        self.priority_eps = settings.prioritized_replay_eps
        samplers = max(workers.num_remote_workers(), 1)
        rows_per_round = (samplers * self.worker_settings.num_envs_per_worker
                          * self.worker_settings.rollout_fragment_length)
        intensity = settings.training_intensity
        strategy = strategy or learner_strategy(learner_settings.num_learner_devices)
        self.strategy = strategy
        replicas = strategy.num_replicas_in_sync
        per_replica_batch = max(self.train_batch_size // replicas, 1)
        in_flight = 2 * per_replica_batch
        local = workers.local_worker()
        self.policy_ids = list(local.policies_to_train)
        self.lanes = {}
        for pid in self.policy_ids:
            # items one round inserts into this policy's table: one per env step and agent of it
            items_per_round = rows_per_round * _agents_of_policy(local, pid)
            spi = float(intensity) if intensity else self.train_batch_size / items_per_round
            self.lanes[pid] = _ReplayLane(pid, "", spi)

        reads_files = OfflineSettings.from_config(config).reads_files

        def make_table(name, signature, pid):
            spi = self.lanes[pid].samples_per_insert
            items_per_round = rows_per_round * _agents_of_policy(local, pid)
            error_buffer = max(2 * (in_flight * replicas + self.train_batch_size + items_per_round * spi),
                               2.0 * max(1.0, spi))
            sampler = (Prioritized(settings.prioritized_replay_alpha) if self.prioritized
                       else Uniform())
            limiter = (MinSize(self.learning_starts) if reads_files
                       else SampleToInsertRatio(spi, self.learning_starts, error_buffer))
            return Table(name, sampler=sampler, remover=Fifo(), max_size=settings.buffer_size,
                         rate_limiter=limiter, signature=signature)

        self.address, tables = declare_replay_tables(workers, self.worker_settings, replay,
                                                     make_table, REPLAY_TABLE, self.policy_ids)
        for pid, lane in self.lanes.items():
            lane.table = tables[pid][0]
            self._build_lane(lane, strategy, per_replica_batch, in_flight)
        # A worker returns from sample() while the server may still be inserting its round (the
        # learner's reads wait for them in the rate limiter), so rollouts do not stall on a busy
        # server.
        point_workers_at_replay(workers, self.worker_settings, self.address, tables,
                                max_unacked_after_write=rows_per_round // samplers,
                                client_kwargs=replay.client_kwargs)
        # the single-policy view (the only or first policy that learns)
        first = self.lanes[self.policy_ids[0]]
        self.policy_id, self.table = first.policy_id, first.table
        self.learner, self.policy, self.iterator = first.learner, first.policy, first.iterator
        self.beta, self.signature = first.beta, first.signature
        self.samples_per_insert = first.samples_per_insert
        self._client = None
        self._pending = None  # refs of the sampling round in flight on the remote workers
        self._rounds_launched = 0

    def _build_lane(self, lane: _ReplayLane, strategy, per_replica_batch: int, in_flight: int) -> None:
        """The lane's learner (a policy copy built under `strategy`, swapped into the local
        worker) and its distributed dataset on the lane's table."""
        from replay import ReplaySample

        from tfrl.learner import MirroredLearner

        local = self.workers.local_worker()
        template = local.get_policy(lane.policy_id)
        lane.learner = MirroredLearner(
            lambda: type(template)(template.observation_space, template.action_space, template.config),
            loss_fn=lambda data: self._loss(lane, data), strategy=strategy, steps_per_call=1)
        lane.policy = lane.learner.trainee
        local.set_policy(lane.policy_id, lane.policy)
        with strategy.scope():
            lane.beta = tf.Variable(self.settings.prioritized_replay_beta,
                                    trainable=False, name="prioritized_replay_beta")
        lane.beta_value = self.settings.prioritized_replay_beta
        lane.signature = lane.policy.loss_input_signature
        service, table = self.replay, lane.table

        def dataset_fn(input_context):
            def with_info(sample):
                data = dict(sample.data)
                data[_PROBABILITY] = tf.cast(sample.info.probability, tf.float32)
                data[_TABLE_SIZE] = tf.cast(sample.info.table_size, tf.float32)
                return ReplaySample(sample.info, data)

            dataset = service.dataset(table, max_in_flight_samples_per_worker=in_flight,
                                      num_workers_per_iterator=1)
            return dataset.batch(per_replica_batch, drop_remainder=True).map(with_info)

        lane.iterator = iter(lane.learner.distribute_datasets_from_function(dataset_fn))
        # Traced now, while remote workers are still starting, rather than at the first step.
        lane.learner.build(lane.iterator)

    @property
    def num_train_steps(self) -> int:
        """Train batches learned so far, over all policies."""
        return sum(lane.num_train_steps for lane in self.lanes.values())

    def _loss(self, lane: _ReplayLane, data):
        data = dict(data)
        probability = data.pop(_PROBABILITY)
        table_size = data.pop(_TABLE_SIZE)
        if self.prioritized:
            weights = tf.pow(table_size * probability, -lane.beta)
            weights = weights / tf.reduce_max(weights)
        else:
            weights = tf.ones_like(probability)
        data[SampleBatch.PRIO_WEIGHTS] = weights
        batch = {k: tree.map_structure(lambda spec, x: tf.cast(x, spec.dtype), spec, data[k])
                 for k, spec in lane.signature.items()}
        return lane.policy.loss_and_stats(batch)

    def _update_priorities(self, outputs, lane: _ReplayLane = None) -> None:
        """One mutate_priorities call for all steps of a learner call of `lane` (default: the
        first policy's); a key sampled twice keeps its latest TD error."""
        if not self.prioritized:
            return
        lane = lane or self.lanes[self.policy_ids[0]]
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
            lane.table, updates=dict(zip(np.concatenate(keys).tolist(), priorities.tolist())))

    def _anneal_beta(self, lane: _ReplayLane) -> None:
        start = self.settings.prioritized_replay_beta
        final = self.settings.final_prioritized_replay_beta
        horizon = max(self.settings.prioritized_replay_beta_annealing_timesteps, 1)
        fraction = min(self.num_steps_sampled / horizon, 1.0)
        value = start + fraction * (final - start)
        # Assigning a mirrored variable costs about as much as a small training step, so it is
        # assigned only when the value changes (never, when beta is not annealed).
        if value != lane.beta_value:
            assign_scalar(lane.beta, value)
            lane.beta_value = value

    def _launch_round(self) -> None:
        """Starts one sample() on every remote worker, after a weight broadcast every
        `broadcast_interval` rounds; nothing waits (each actor runs its calls in order)."""
        import ray

        workers = self.workers.remote_workers()
        global_vars = {"timestep": self.num_steps_sampled}
        with self.timer("sync_weights"):
            if self._rounds_launched % self.broadcast_interval == 0:
                weights = ray.put(self.workers.local_worker().get_weights(self.policy_ids))
                for worker in workers:
                    worker.set_weights.remote(weights, global_vars)
        self._rounds_launched += 1
        self._pending = [(worker, worker.sample.remote()) for worker in workers]

    def _finish_round(self):
        """Waits for the round in flight; returns (env steps, episodes, {policy_id: items
        inserted}). Failed workers are recreated by the WorkerSet and left out."""
        pending, self._pending = self._pending, None
        summaries = self.workers.gather(pending) if pending else []
        return summarize_round(summaries)

    def _sample(self):
        if not self.workers.remote_workers():
            steps, episodes, items = sample_round(self.workers)
            self.workers.local_worker().set_global_vars(
                {"timestep": self.num_steps_sampled + steps})
            return steps, episodes, items
        if self._pending is None:
            self._launch_round()
        steps, episodes, items = self._finish_round()
        self.workers.local_worker().set_global_vars({"timestep": self.num_steps_sampled + steps})
        self._launch_round()  # sampled while the learner trains on what is already stored
        return steps, episodes, items

    def _count_round(self, steps: int, episodes: list, items: dict) -> None:
        self.num_steps_sampled += steps
        self._new_episodes.extend(episodes)
        for pid, n in items.items():
            if pid in self.lanes:
                self.lanes[pid].items_inserted += n

    def step(self) -> dict:
        with self.timer("sample"):
            self._count_round(*self._sample())
        for lane in self.lanes.values():
            self._train_lane(lane)
        return self.learner_stats

    def _train_lane(self, lane: _ReplayLane) -> None:
        """Trains the batches the items inserted into the lane's table paid for."""
        paid = max(lane.items_inserted - self.learning_starts, -1) + 1
        owed = int(paid * lane.samples_per_insert // self.train_batch_size) - lane.num_train_steps
        if owed <= 0:
            return
        self._anneal_beta(lane)
        outputs = []
        with self.timer("learn"):
            while len(outputs) < owed:
                taken = lane.learner.train(lane.iterator, num_steps=owed - len(outputs))
                if not taken:
                    break
                outputs.extend(taken)
        with self.timer("update_priorities"):
            self._update_priorities(outputs, lane)
        lane.num_train_steps += owed
        self.num_steps_trained += sum(o.batch_size for o in outputs)
        if outputs:
            from tfrl.learner import mean_stats

            previous = self.learner_stats.get(lane.policy_id)
            self.learner_stats = dict(self.learner_stats,
                                      **{lane.policy_id: mean_stats(outputs, previous)})

    def drain(self) -> None:
        """Waits for the sampling round in flight and counts its steps and episodes."""
        if self._pending is not None:
            self._count_round(*self._finish_round())

    def save(self) -> dict:
        self.drain()
        return dict(super().save(), num_train_steps=self.num_train_steps,
                    lanes={pid: {"num_train_steps": lane.num_train_steps,
                                 "items_inserted": lane.items_inserted}
                           for pid, lane in self.lanes.items()})

    def restore(self, state: dict) -> None:
        super().restore(state)
        lanes = state.get("lanes")
        if lanes is None:  # a checkpoint of one policy, counted in env steps
            lanes = {self.policy_ids[0]: {"num_train_steps": state.get("num_train_steps", 0),
                                          "items_inserted": state["num_steps_sampled"]}}
        for pid, counters in lanes.items():
            if pid in self.lanes:
                self.lanes[pid].num_train_steps = int(counters["num_train_steps"])
                self.lanes[pid].items_inserted = int(counters["items_inserted"])

    def stop(self) -> None:
        try:
            self.drain()
        except Exception:  # noqa: BLE001 - stopping must not fail on a worker that died
            pass
        self.replay.close_datasets()
        for lane in self.lanes.values():  # their iterators go now, not in a later collection
            if lane.learner is not None:
                lane.learner.release_iterators()
            lane.iterator = None
        self.iterator = None
        super().stop()


def _agents_of_policy(worker, policy_id: str) -> int:
    """How many of the env's agents map to `policy_id` (at least 1): an upper bound of the
    items one env step writes into that policy's table."""
    if not worker.multi_agent:
        return 1
    agents = worker.known_agent_ids()
    return max(sum(1 for agent in agents if worker.policy_mapping_fn(agent) == policy_id), 1)
