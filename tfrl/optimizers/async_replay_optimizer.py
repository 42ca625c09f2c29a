"""AsyncReplayOptimizer: Ape-X's distributed prioritized replay over several replay shards.

The data path (Horgan et al. 2018; RLlib's AsyncReplayOptimizer):

    rollout workers ──(each fragment to one shard, rotating)──> replay shards 0..S-1
          ^                                                          │ ReplayDataset per shard,
          │ newest published weights, before a worker's next sample  │ batches interleaved
          └──────────────────────── learner thread <─────────────────┘
                                        │ |TD| + eps to the shard each item came from

- Every remote worker samples continuously: the driver relaunches a worker's `sample()` as soon
  as its previous one returned (no rounds, no waiting for the slowest worker). Each worker acts
  with its own constant epsilon eps_i = eps ** (1 + i / (N - 1) * alpha) (`per_worker_epsilon`,
  per_worker_exploration.py)
  and, with `worker_side_prioritization`, rates its own n-step transitions: their initial
  priority is |TD error| + eps from its copy of the networks (the `priorities` column its
  postprocessing adds, which replay turns into the item priority and does not store).
- The shards are replay servers the trainer starts, each a process of its own (`ReplayShards`),
  or external servers (`replay_shard_addresses`). Each holds a table `replay` of
  buffer_size / S items; learning starts when each holds learning_starts / S.
- A learner thread in the driver reads batches from every shard (one `ReplayDataset` per shard,
  batched, interleaved round-robin, under the MirroredStrategy of `num_learner_devices`), takes
  `learner_steps_per_call` gradient steps per call, sends |TD error| + eps of every sampled item
  back to the shard it came from (queued to a sender thread, which makes one `mutate_priorities`
  call per shard for whatever queued while its previous call was on the wire), publishes weights
  (`ray.put`, no waiting) every `max_weight_sync_delay` gradient steps, once a worker has taken
  the previously published version (none is published that no worker would see), copies the online
  network into the target every `target_network_update_freq` trained rows (publishing the
  target too: workers rate their transitions against the learner's target network).
- Sampling (worker processes), transfer (the datasets' reader threads), learning (the
  learner thread) and priority updates (the sender thread) run concurrently; the driver's
  `step()` only waits for the next finished sample, counts it, and relaunches that worker with
  the newest weights.

A lost shard (its process or node died) is dropped or restarted from its checkpoint
(shard_failover.py), and the learner goes on with the live shards. Samples in flight to the lost
shard are lost with it; the result dict counts the losses (`num_replay_shard_failures`,
`num_replay_shard_restarts`, `num_replay_shards_live`).

With `training_intensity` each shard's `SampleToInsertRatio` limiter holds the replay ratio
(the learner waits for data, workers wait for the learner beyond a wide error buffer); without
it the learner runs as fast as it can, as in the paper.
Single-policy: the default (or only) learning policy.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
import tree

from tfrl import errors
from tfrl.learner.priority_sender import PrioritySender
from tfrl.optimizers.per_worker_exploration import set_worker_epsilon, set_worker_target
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.rollout_replay import sample_round, summarize_round
from tfrl.optimizers.replay_stats import CompressionReport
from tfrl.optimizers.settings import AsyncReplaySettings, LearnerSettings
from tfrl.optimizers.shard_failover import ShardFailOver, lost_replay_write
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.settings import WorkerSettings

logger = logging.getLogger(__name__)

REPLAY_TABLE = "replay"
_PROBABILITY = "_sample_probability"
_TABLE_SIZE = "_sample_table_size"
_SHARD = "_replay_shard"


class AsyncReplayOptimizer(ShardFailOver, PolicyOptimizer):
    """Config keys: those of AsyncReplaySettings and LearnerSettings (read once, here).

    Raises (constructor):
      InvalidConfigError: a missing, ill-typed or out-of-range key; several policies to train
        (Ape-X here learns one policy); an external shard without the `replay` table.
    """

    results_bring_episodes = True  # every sample summary

    def __init__(self, workers, config: dict, replay, strategy: tf.distribute.Strategy = None):
        super().__init__(workers, config, replay)
        from replay import (Fifo, MinSize, Prioritized, SampleToInsertRatio, StatisticsExtension,
                            Table, Uniform)

        from tfrl.learner.strategy import learner_strategy
        from tfrl.replay_hosting import ReplayShards
        from tfrl.rollout import replay_columns, replay_signature
        from tfrl.rollout.replay_output import PRIORITY_COLUMN

        self.settings = settings = AsyncReplaySettings.from_config(config)
        self.worker_settings = ws = WorkerSettings.from_config(config)
        local = workers.local_worker()
        if len(local.policies_to_train) != 1:
            raise errors.InvalidConfigError(
                f"AsyncReplayOptimizer learns one policy, got policies_to_train "
                f"{list(local.policies_to_train)}; use SyncReplayOptimizer (DQN) for several")
        self.policy_id = pid = local.policies_to_train[0]
        self.strategy = strategy or learner_strategy(
            LearnerSettings.from_config(config).num_learner_devices)
        self.shards = ReplayShards(settings.num_replay_shards, settings.replay_shard_addresses,
                                   replay.client_kwargs if replay is not None else None,
                                   hosting=getattr(replay, "hosting", None),
                                   checkpoint_dir=settings.replay_shard_checkpoint_dir)
        num_shards = self.shards.num_shards
        self.num_shards = num_shards
        self.train_batch_size = settings.train_batch_size
        replicas = self.strategy.num_replicas_in_sync
        per_replica_batch = max(self.train_batch_size // replicas, 1)
        in_flight = 2 * per_replica_batch

        policy = local.get_policy(pid)
        # the workers' `priorities` column sets the item priority; it is not stored
        self.columns = [c for c in replay_columns(policy, ws.observation_filter)
                        if c != PRIORITY_COLUMN]
        signature = self.table_signature = replay_signature(policy, self.columns,
                                                            ws.observation_filter)
        min_size = max(settings.learning_starts // num_shards, 1)
        if settings.training_intensity:
            samplers = max(workers.num_remote_workers(), 1)
            fragment = ws.num_envs_per_worker * ws.rollout_fragment_length
            # wide enough that no worker waits while every other one writes a fragment
            error_buffer = max(4.0 * (samplers * fragment + in_flight * replicas
                                      + self.train_batch_size) * settings.training_intensity,
                               2.0 * max(1.0, settings.training_intensity))
            rate_limiter = SampleToInsertRatio(settings.training_intensity, min_size, error_buffer)
        else:
            rate_limiter = MinSize(min_size)
        self.shards.add_table(Table(
            REPLAY_TABLE,
            sampler=(Prioritized(settings.prioritized_replay_alpha)
                     if settings.prioritized_replay else Uniform()),
            remover=Fifo(), max_size=max(settings.buffer_size // num_shards, 1),
            rate_limiter=rate_limiter, signature=signature,
            extensions=[StatisticsExtension()]))
        self.addresses = self.shards.start()
        self.live_shards: List[int] = list(range(num_shards))
        self.num_shard_failures = 0
        self.num_shard_restarts = 0
        self._last_shard_check = self._last_shard_checkpoint = time.monotonic()
        self._known_worker_failures = workers.num_worker_failures
        self._shard_suspect = False  # a write failed: check the shards at once
        workers.set_replay_output(self._output_spec())
        self._datasets: List = []
        self._per_replica_batch, self._in_flight_samples = per_replica_batch, in_flight
        self._build_learner(per_replica_batch, in_flight)

        # shared between the learner thread and the driver
        self._lock = threading.Lock()
        self._weights_ref = None
        self._weights_version = 0
        # a newer version is due (max_weight_sync_delay steps passed); the newest version the
        # driver has handed to a worker (the last one was taken when it equals _weights_version)
        self._weights_due = False
        self._version_taken = 0
        self._target_ref = None
        self._target_version = 0
        self._learner_error: Optional[BaseException] = None
        self._stop_learning = threading.Event()
        self._learner_thread: Optional[threading.Thread] = None
        self._compression = CompressionReport(REPLAY_TABLE, self.table_signature)
        self.num_train_steps = 0
        self.num_target_updates = 0
        self._last_target_update = 0
        self.priority_updates_per_shard = [0] * num_shards
        self._priority_sender: Optional[PrioritySender] = None  # while the learner runs
        # driver side: the samples in flight (ref -> worker), the (weights, target) versions
        # each worker has
        self._in_flight: Dict = {}
        self._worker_version: Dict = {}

    def _output_spec(self):
        """Where the workers write: every live shard, rotating."""
        from tfrl.rollout import ReplayOutputSpec

        ws, client_kwargs = self.worker_settings, self.shards.client_kwargs
        return ReplayOutputSpec(
            [self.shards.addresses[i] for i in self.live_shards], {self.policy_id: REPLAY_TABLE},
            columns={self.policy_id: self.columns}, chunk_length=ws.rollout_fragment_length,
            max_unacked_after_write=ws.num_envs_per_worker * ws.rollout_fragment_length,
            token=client_kwargs.get("token"),
            root_certificates=client_kwargs.get("root_certificates"))

    # ----- the learner ----------------------------------------------------------------------
    def _build_learner(self, per_replica_batch: int, in_flight: int) -> None:
        from tfrl.learner import MirroredLearner

        local = self.workers.local_worker()
        template = local.get_policy(self.policy_id)
        self.learner = MirroredLearner(
            lambda: type(template)(template.observation_space, template.action_space,
                                   template.config),
            loss_fn=self._loss, strategy=self.strategy, steps_per_call=1)
        self.policy = self.learner.trainee
        local.set_policy(self.policy_id, self.policy)
        self.signature = self.policy.loss_input_signature
        self._open_datasets()
        # traced now, while the remote workers start, rather than at the first step
        self.learner.build(self.iterator)

    def _open_datasets(self) -> None:
        """The learner's iterator: batches of every live shard, interleaved round-robin, each
        item tagged with its shard's index."""
        from replay import ReplaySample

        shards, live = self.shards, list(self.live_shards)
        per_replica_batch, in_flight = self._per_replica_batch, self._in_flight_samples

        def dataset_fn(input_context):
            def tagged(shard):
                def with_info(sample):
                    data = dict(sample.data)
                    data[_PROBABILITY] = tf.cast(sample.info.probability, tf.float32)
                    data[_TABLE_SIZE] = tf.cast(sample.info.table_size, tf.float32)
                    data[_SHARD] = tf.fill(tf.shape(sample.info.probability), shard)
                    return ReplaySample(sample.info, data)
                return with_info

            per_shard = []
            for shard in live:
                dataset = shards.dataset(shard, REPLAY_TABLE,
                                         max_in_flight_samples_per_worker=in_flight,
                                         num_workers_per_iterator=1)
                self._datasets.append(dataset)
                per_shard.append(dataset.batch(per_replica_batch, drop_remainder=True)
                                 .map(tagged(shard)))
            if len(per_shard) == 1:
                return per_shard[0].prefetch(1)
            order = tf.data.Dataset.range(len(per_shard)).repeat()
            return tf.data.Dataset.choose_from_datasets(per_shard, order).prefetch(1)

        self.iterator = iter(self.learner.distribute_datasets_from_function(dataset_fn))

    def _loss(self, data):
        data = dict(data)
        probability = data.pop(_PROBABILITY)
        table_size = data.pop(_TABLE_SIZE)
        shard = data.pop(_SHARD)
        if self.settings.prioritized_replay:
            weights = tf.pow(table_size * probability, -self.settings.prioritized_replay_beta)
            weights = weights / tf.reduce_max(weights)
        else:
            weights = tf.ones_like(probability)
        data[SampleBatch.PRIO_WEIGHTS] = weights
        batch = {k: tree.map_structure(lambda spec, x: tf.cast(x, spec.dtype), spec, data[k])
                 for k, spec in self.signature.items()}
        loss, stats, per_sample = self.policy.loss_and_stats(batch)
        return loss, stats, dict(per_sample, **{_SHARD: shard})

    def learner_policies(self) -> dict:
        """{policy_id: the learner's policy copy} (target updates of trainer hooks)."""
        return {self.policy_id: self.policy}

    def _learn_once(self) -> bool:
        """One learner call: gradient steps, priority updates, target update and weight
        publication when due. False when the datasets ended (stopping)."""
        outputs = self.learner.train(self.iterator, num_steps=self.settings.learner_steps_per_call)
        if not outputs:
            return False
        with self.timer("update_priorities"):
            self._update_priorities(outputs)
        from tfrl.learner import mean_stats

        steps_before = self.num_train_steps
        self.num_train_steps += len(outputs)
        self.num_steps_trained += sum(o.batch_size for o in outputs)
        self.learner_stats = {self.policy_id: mean_stats(outputs, self.learner_stats.get(self.policy_id))}
        if (self.num_steps_trained - self._last_target_update
                >= self.settings.target_network_update_freq):
            self.policy.update_target()
            self._last_target_update = self.num_steps_trained
            self.num_target_updates += 1
            self.publish_weights(target=True)
            return True
        delay = self.settings.max_weight_sync_delay
        if self.num_train_steps // delay > steps_before // delay:
            self._weights_due = True
        # Published only once a worker has taken the last version: a version no worker pulled
        # before the next one replaced it cost the learner a read of every variable and a
        # `ray.put` for nothing (a fifth of the driver's CPU on CartPole, where the learner
        # could publish 25 times a second and the workers pull about 12 times).
        if self._weights_due and self._version_taken == self._weights_version:
            self.publish_weights()
        return True

    def publish_weights(self, target: bool = False) -> None:
        """Puts the learner's online weights (and with `target`, its target network's) into
        Ray's object store, where each worker's next `send_newest_weights` takes them."""
        import ray

        ref = ray.put(self.workers.local_worker().get_weights([self.policy_id]))
        target_ref = None
        if target:
            target_ref = ray.put([v.numpy() for v in self.policy.target_model.variables])
        with self._lock:
            self._weights_ref = ref
            self._weights_version += 1
            self._weights_due = False
            if target_ref is not None:
                self._target_ref = target_ref
                self._target_version += 1

    def _update_priorities(self, outputs) -> None:
        """|TD error| + eps of every sampled item, queued for the shard it came from (the
        PrioritySender makes one `mutate_priorities` call per shard; a key sampled twice keeps
        its latest TD error).

        Raises:
          The error an earlier priority update failed with (a lost shard, for instance).
        """
        if not self.settings.prioritized_replay:
            return
        updates: Dict[int, Dict[int, float]] = defaultdict(dict)
        for output in outputs:
            td_error = output.per_sample.get(SampleBatch.TD_ERROR)
            if output.info is None or td_error is None:
                continue
            keys = np.asarray(output.info.key).reshape(-1).tolist()
            shards = np.asarray(output.per_sample[_SHARD]).reshape(-1).tolist()
            priorities = (np.abs(np.asarray(td_error, np.float64).reshape(-1))
                          + self.settings.prioritized_replay_eps).tolist()
            for key, shard, priority in zip(keys, shards, priorities):
                updates[int(shard)][key] = priority
        updates = {shard: shard_updates for shard, shard_updates in updates.items()
                   if shard in self.live_shards}  # not those sampled before a shard was lost
        if updates:
            if self._priority_sender is None:
                self._priority_sender = PrioritySender(self._send_priorities)
            self._priority_sender.put(updates)

    def _send_priorities(self, shard: int, updates: Dict[int, float]) -> None:
        """One shard's priority updates (runs in the PrioritySender's thread)."""
        self.shards.client(shard).mutate_priorities(REPLAY_TABLE, updates=updates)
        self.priority_updates_per_shard[shard] += len(updates)

    def flush_priorities(self, timeout: Optional[float] = None) -> bool:
        """Waits until the priority updates queued so far have reached their shards; False if
        `timeout` passed first.

        Raises:
          The error a priority update failed with.
        """
        sender = self._priority_sender
        return True if sender is None else sender.flush(timeout)

    def _learn_loop(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                with self.timer("learn"):
                    if not self._learn_once():
                        return
        except Exception as exc:  # noqa: BLE001 - handed to the driver, raised by step()
            if not stop.is_set():
                logger.warning("the Ape-X learner thread failed: %s: %s", type(exc).__name__, exc)
                self._learner_error = exc

    def _start_learner(self) -> None:
        if self._learner_thread is None:
            self.publish_weights(target=True)
            self._learner_thread = threading.Thread(target=self._learn_loop,
                                                    args=(self._stop_learning,),
                                                    name="apex-learner", daemon=True)
            self._learner_thread.start()

    def _stop_learner(self) -> None:
        """Stops the learner thread and closes its datasets (a later `_start_learner` starts a
        new one)."""
        self._stop_learning.set()
        for dataset in self._datasets:
            dataset.close()  # ends the learner's pending reads
        if self._learner_thread is not None:
            self._learner_thread.join(timeout=30)
        self._learner_thread = None
        if self._priority_sender is not None:
            self._priority_sender.close()
            self._priority_sender = None
        self._datasets = []
        self._stop_learning = threading.Event()

    def _raise_learner_error(self) -> None:
        if self._learner_error is not None:
            raise errors.TfrlError(
                f"the Ape-X learner thread failed: {type(self._learner_error).__name__}: "
                f"{self._learner_error}") from self._learner_error

    # ----- the driver: coordination only -----------------------------------------------------
    def send_newest_weights(self, worker) -> None:
        """Gives `worker` its per-worker epsilon (the first time) and the newest published
        online and target weights it lacks; nothing waits (an actor runs its calls in order,
        so its next sample uses them)."""
        settings = self.settings
        if worker not in self._worker_version:
            self._worker_version[worker] = (0, 0)
            if settings.per_worker_exploration:
                worker.apply.remote(set_worker_epsilon, self.workers.num_remote_workers(),
                                    settings.worker_epsilon, settings.worker_epsilon_alpha)
        with self._lock:
            ref, version = self._weights_ref, self._weights_version
            target_ref, target_version = self._target_ref, self._target_version
        has, has_target = self._worker_version[worker]
        with self.timer("sync_weights"):
            if ref is not None and has < version:
                worker.set_weights.remote(ref, {"timestep": self.num_steps_sampled})
                has = self._version_taken = version
            if target_ref is not None and has_target < target_version:
                worker.apply.remote(set_worker_target, self.policy_id, target_ref)
                has_target = target_version
        self._worker_version[worker] = (has, has_target)

    def _launch(self, worker) -> None:
        """The worker's next sample, after the newest weights."""
        self.send_newest_weights(worker)
        self._in_flight[worker.sample.remote()] = worker

    def step(self) -> dict:
        import ray

        self._watch_shards()
        self._start_learner()
        local = self.workers.local_worker()
        if not self.workers.remote_workers():
            with self.timer("sample"):
                steps, episodes, _ = sample_round(self.workers)
            self._count(steps, episodes)
            return self.learner_stats
        busy = set(self._in_flight.values())
        for worker in self.workers.remote_workers():
            if worker not in busy:  # first step, or a recreated worker
                for _ in range(self.settings.max_sample_requests_in_flight_per_worker):
                    self._launch(worker)
        with self.timer("sample"):
            ready = []
            while not ready:  # workers may wait for the learner (rate limiter): watch it
                ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=1.0)
                self._watch_shards()
            ready, _ = ray.wait(list(self._in_flight), num_returns=len(self._in_flight), timeout=0)
            finished = [(self._in_flight.pop(ref), ref) for ref in ready]
            for worker, ref in finished:
                if worker not in self.workers.remote_workers():
                    continue  # recreated after its other sample failed: nothing to count
                index = self.workers.remote_worker_index(worker)
                try:
                    summaries = self.workers.gather([(worker, ref)])  # a failed one is recreated
                except Exception as exc:  # noqa: BLE001 - a write to a lost shard is survived
                    if not lost_replay_write(exc):
                        raise
                    logger.warning("a sample of worker %d was lost with its replay shard: %s",
                                   index, exc)
                    self._shard_suspect = True
                    continue
                steps, episodes, _ = summarize_round(summaries)
                self._count(steps, episodes if self._reports_episodes(index) else [])
        local.set_global_vars({"timestep": self.num_steps_sampled})
        healthy = set(self.workers.remote_workers())
        for worker, _ in finished:
            if worker in healthy:
                self._launch(worker)
        for worker in list(self._worker_version):
            if worker not in healthy:
                del self._worker_version[worker]
        return self.learner_stats

    def _reports_episodes(self, worker_index: int) -> bool:
        """With per-worker epsilons, only the least-exploring third of the workers (rounded
        up) report episodes, as in RLlib's Ape-X: the returns then measure the policy rather
        than eps = 0.4 exploration."""
        num_workers = self.workers.num_remote_workers()
        if not self.settings.per_worker_exploration or num_workers == 0:
            return True
        return worker_index > num_workers - -(-num_workers // 3)

    def _count(self, steps: int, episodes: list) -> None:
        self.num_steps_sampled += steps
        self._new_episodes.extend(episodes)

    def stats(self) -> dict:
        out = dict(super().stats(), num_train_steps=self.num_train_steps,
                   num_target_updates=self.num_target_updates,
                   weights_version=self._weights_version, num_replay_shards=self.num_shards,
                   num_replay_shards_live=len(self.live_shards),
                   num_replay_shard_failures=self.num_shard_failures,
                   num_replay_shard_restarts=self.num_shard_restarts)
        compression = self._compression([self.shards.client(i) for i in self.live_shards])
        if compression is not None:
            out["replay"] = compression
        return out

    def save(self) -> dict:
        return dict(super().save(), num_train_steps=self.num_train_steps,
                    last_target_update=self._last_target_update)

    def restore(self, state: dict) -> None:
        super().restore(state)
        self.num_train_steps = int(state.get("num_train_steps", 0))
        self._last_target_update = int(state.get("last_target_update", 0))

    def stop(self) -> None:
        """Stops the learner thread and the shard servers the trainer started, then takes the
        outcome of every sample still in flight: a worker writing to a stopped shard fails,
        and its error, expected here, is taken rather than left for Ray to print as unhandled.
        (Waiting for those samples first could take until their flush timeout: a worker whose
        shard's rate limiter waits for the stopped learner does not finish.)"""
        import ray

        self._stop_learner()
        # the learner's iterator goes now, not in some later garbage collection
        self.learner.release_iterators()
        self.iterator = None
        refs = list(self._in_flight)
        self._in_flight = {}
        self.shards.stop()
        deadline = time.monotonic() + 10.0
        for ref in refs:
            try:
                ray.get(ref, timeout=max(deadline - time.monotonic(), 0.1))
            except Exception:  # noqa: BLE001 - lost with its shard, or its worker died
                pass
        super().stop()
