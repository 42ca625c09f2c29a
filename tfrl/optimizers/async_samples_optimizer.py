"""AsyncSamplesOptimizer: IMPALA's data flow. Workers sample without waiting for the learner,
write whole trajectory fragments into a replay Queue table, and a learner thread learns on them.

    worker i: sample() -> ReplayOutput: one item per env per fragment of
              rollout_fragment_length steps (with the behaviour logits) -> learner queue table
    learner thread: ReplayDataset(queue).batch(train_batch_size / rollout_fragment_length)
              -> MinibatchBuffer (num_sgd_iter, minibatch_buffer_size) -> MinibatchSGD
    driver:   keeps max_sample_requests_in_flight_per_worker sample() calls on every worker;
              when one returns, the worker gets the newest weights (one ray.put per refresh)
              before its next sample() is queued behind them

A fragment's `new_obs` repeats its `obs` one step later, so workers store it only at episode
and fragment ends (zeros elsewhere; `ReplayOutputSpec.drop_repeated_next_obs`) and the learner's
input pipeline rebuilds the rest (`restore_next_obs`): frame-stacked images are not written
twice. The queue table's StatisticsExtension gives `stats()["replay"]` (compression ratio,
stored bytes per column).

The queue table is the learner queue: its rate limiter makes writers wait while it holds
`learner_queue_size` fragments, so sampling can run at most that far ahead of learning. Each
fragment is one item of consecutive steps of one env, so it reaches the learner whole and the
fragments of one worker reach it in the order they were written. The bulk data goes worker ->
replay server -> learner; the driver sees counts, metrics and weights.

The learner thread starts with the first `step()`. One policy learns (the default one); the
learner is the local worker's own policy on one device: a `build_tf_policy` policy through
`MinibatchSGD` (its loss's columns travel, fragments keep their time dimension), any other
`Policy` through its own `learn_on_batch` on the fragments' rows (every column travels).
See docs/architecture.md, "Data path".
"""
from __future__ import annotations

import logging
import math
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

from tfrl import errors
from tfrl.config import merge_model_config
from tfrl.learner.learner_thread import LearnerThread
from tfrl.learner.minibatch_sgd import MinibatchSGD, flatten_sequences
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.rollout_replay import numeric_columns
from tfrl.optimizers.settings import AsyncSamplesSettings
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.settings import WorkerSettings
from tfrl.utils.tf_data import without_autotuning

logger = logging.getLogger(__name__)

LEARNER_QUEUE_TABLE = "learner_queue"
# seconds a worker may wait for room in the learner queue before its write fails
WRITE_TIMEOUT_S = 600.0


class AsyncSamplesOptimizer(PolicyOptimizer):
    """Config keys: those of AsyncSamplesSettings (read once, here), and the rollout keys of
    WorkerSettings. Built outside a trainer (`AsyncSamplesOptimizer(workers,
    train_batch_size=500)`, classic RLlib's form), keys missing from the workers' config take
    STANDALONE_DEFAULTS (classic RLlib's defaults of this optimizer).

    A learner batch is the fewest whole fragments of rollout_fragment_length steps that hold
    train_batch_size steps (the IMPALA trainer asks for a multiple, so the two agree there).

    Raises (constructor):
      InvalidConfigError: a missing, ill-typed or out-of-range key, complete_episodes batches,
        a recurrent model, or several policies to train.
    """

    uses_replay = True
    STANDALONE_DEFAULTS = {"train_batch_size": 500, "num_sgd_iter": 1,
                           "minibatch_buffer_size": 1, "learner_queue_size": 16,
                           "max_sample_requests_in_flight_per_worker": 2,
                           "broadcast_interval": 1}

    def __init__(self, workers, config: Optional[dict] = None, replay=None, **settings):
        super().__init__(workers, config, replay, **settings)
        from replay import StatisticsExtension, Table
        from tfrl.rollout import ReplayOutputSpec, fragment_signature, replay_signature
        from tfrl.rollout.replay_output import dummy_trajectory, restore_next_obs

        config = self.config = {**self.STANDALONE_DEFAULTS, **self.config}
        replay = self.replay
        self.settings = settings = AsyncSamplesSettings.from_config(config)
        self.worker_settings = WorkerSettings.from_config(config)
        length = self.worker_settings.rollout_fragment_length
        check_fragment_config({**config, "rollout_fragment_length": length,
                               "batch_mode": self.worker_settings.batch_mode},
                              whole_fragments=False)
        local = workers.local_worker()
        if len(local.policies_to_train) != 1:
            raise errors.InvalidConfigError(
                f"AsyncSamplesOptimizer trains one policy, but policies_to_train is "
                f"{list(local.policies_to_train)}; train one policy")
        self.policy_id = local.policies_to_train[0]
        self.policy = local.get_policy(self.policy_id)
        observation_filter = self.worker_settings.observation_filter
        learns_declared_loss = hasattr(self.policy, "loss_input_signature")  # build_tf_policy
        if learns_declared_loss:
            # only the columns the loss reads travel (no value predictions or log-probabilities)
            loss_columns = set(self.policy.loss_input_signature)
            columns = [c for c in replay_signature(self.policy,
                                                   observation_filter=observation_filter)
                       if c in loss_columns]
        else:
            columns = numeric_columns(dummy_trajectory(self.policy, observation_filter))
        step_signature = replay_signature(self.policy, columns,
                                          observation_filter=observation_filter)
        table = Table.queue(LEARNER_QUEUE_TABLE, settings.learner_queue_size,
                            extensions=[StatisticsExtension()],
                            signature=fragment_signature(step_signature, length))
        replay.add_table(table)
        self.table_signature = table.signature
        self.address = replay.start()
        self.table = table.name
        client_kwargs = replay.client_kwargs or {}
        # a fragment's new_obs repeat its obs one step later: only the ones at episode and
        # fragment ends are stored (frames are not written twice); the reader rebuilds the rest
        dedupe = {SampleBatch.OBS, SampleBatch.NEXT_OBS, SampleBatch.TERMINATEDS,
                  SampleBatch.TRUNCATEDS} <= set(step_signature)
        workers.set_replay_output(ReplayOutputSpec(
            self.address, {self.policy_id: self.table},
            columns={self.policy_id: list(step_signature)}, chunk_length=length,
            item_length=length, flush_timeout=WRITE_TIMEOUT_S, token=client_kwargs.get("token"),
            root_certificates=client_kwargs.get("root_certificates"),
            drop_repeated_next_obs=dedupe))
        self.fragments_per_batch = math.ceil(settings.train_batch_size / length)
        steps_per_batch = self.fragments_per_batch * length
        dataset = replay.dataset(
            self.table, max_in_flight_samples_per_worker=2 * self.fragments_per_batch,
            num_workers_per_iterator=1)
        if dedupe:
            dataset = dataset.map(lambda sample: restore_next_obs(sample.data, length))
        else:
            dataset = dataset.map(lambda sample: sample.data)
        dataset = dataset.batch(self.fragments_per_batch)
        self.batches = iter(without_autotuning(dataset))
        if learns_declared_loss:
            self.sgd = MinibatchSGD(self.policy, tf.distribute.get_strategy(), num_sgd_iter=1,
                                    minibatch_size=steps_per_batch, sequence_length=length)
        else:
            self.sgd = PolicyRowsLearner(self.policy)
        self.learner = LearnerThread(
            self.sgd, lambda: next(self.batches), steps_per_batch,
            minibatch_buffer_size=settings.minibatch_buffer_size,
            num_sgd_iter=settings.num_sgd_iter)
        self._pending: Dict[Any, Any] = {}  # sample() ref -> worker
        self._weights_ref = None
        self._weights_version = -1   # learner version the current weights object holds
        self._worker_versions: Dict[Any, int] = {}
        self.num_weight_broadcasts = 0

    # --- the driver's loop --------------------------------------------------------------
    def _launch(self, worker) -> None:
        version = self._worker_versions.get(worker, -1)
        if self._weights_ref is not None and version < self._weights_version:
            worker.set_weights.remote(self._weights_ref,
                                      {"timestep": self.num_steps_sampled})
            self._worker_versions[worker] = self._weights_version
            self.num_weight_broadcasts += 1
        self._pending[worker.sample.remote()] = worker

    def _refresh_weights(self) -> None:
        """A new weights object when the learner took `broadcast_interval` steps since the
        last one."""
        import ray

        version = self.learner.weights_version
        if version - max(self._weights_version, 0) >= self.settings.broadcast_interval or (
                self._weights_ref is None and version > 0):
            self._weights_ref = ray.put({self.policy_id: self.sgd.get_weights()})
            self._weights_version = version

    def _check_learner(self) -> None:
        if self.learner.error is not None:
            raise errors.LearnerError(
                f"the learner thread failed: {self.learner.error!r}") from self.learner.error

    def step(self) -> dict:
        """Handles the sample() calls that returned (at least one): counts their steps and
        episodes, sends the newest weights to their workers and queues their next sample().

        Raises:
          LearnerError: the learner thread failed (its error is the cause).
          whatever a worker's sample() raised, except worker failures (the worker is recreated).
        """
        import ray

        from tfrl.rollout.worker_set import is_worker_failure

        if self.learner.ident is None:
            self.learner.start()  # the learner starts with the first step
        self._check_learner()
        remote = self.workers.remote_workers()
        if not remote:
            return self._step_local()
        if not self._pending:
            for worker in remote:
                for _ in range(self.settings.max_sample_requests_in_flight_per_worker):
                    self._launch(worker)
        with self.timer("wait"):
            ready: List[Any] = []
            while not ready:
                ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=1.0)
                self._check_learner()
            ready, _ = ray.wait(list(self._pending), num_returns=len(self._pending), timeout=0)
        self._refresh_weights()
        for ref in ready:
            worker = self._pending.pop(ref)
            try:
                summary = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - sorted into worker failures and others
                if not is_worker_failure(exc):
                    raise
                self._replace_worker(worker, exc)
                continue
            self._count(summary)
            self._launch(worker)
        self._sync_learner_counters()
        return self.learner_stats

    def _replace_worker(self, worker, exc) -> None:
        for ref in [r for r, w in self._pending.items() if w is worker]:
            del self._pending[ref]
        self._worker_versions.pop(worker, None)
        new = self.workers.recreate_worker(worker, exc)
        if new is not None:
            for _ in range(self.settings.max_sample_requests_in_flight_per_worker):
                self._launch(new)

    def _step_local(self) -> dict:
        """num_workers = 0: the local worker samples in the driver (its policy is the learner's,
        so its weights are always the newest)."""
        self._count(self.workers.local_worker().sample())
        self._sync_learner_counters()
        return self.learner_stats

    def _count(self, summary) -> None:
        self.num_steps_sampled += summary["env_steps"]
        self._new_episodes.extend(summary["episodes"])

    def _sync_learner_counters(self) -> None:
        with self.learner.lock:
            self.num_steps_trained = self.learner.num_steps_trained
            stats = dict(self.learner.stats)
        if stats:
            self.learner_stats = {self.policy_id: stats}
        self.policy.on_global_var_update({"timestep": self.num_steps_sampled})

    def stats(self) -> dict:
        with self.learner.lock:
            batches, version = self.learner.num_batches_read, self.learner.weights_version
        from tfrl.optimizers.replay_stats import table_compression

        out = {**super().stats(), "learner_queue_size": self.settings.learner_queue_size,
               "num_weight_broadcasts": self.num_weight_broadcasts,
               "num_batches_learned": batches, "learner_weights_version": version}
        compression = table_compression([self.replay.client()], self.table, self.table_signature)
        if compression is not None:
            out["replay"] = compression
        return out

    def stop(self) -> None:
        if self.learner.ident is None:
            super().stop()
            return
        self.learner.stop(timeout=0)
        self.replay.close_datasets()  # ends a read the learner thread is blocked in
        self.learner.stop(timeout=10.0)
        super().stop()


def check_fragment_config(config: dict, whole_fragments: bool = True) -> None:
    """The rollout settings trajectory-fragment learning needs.

    Raises:
      InvalidConfigError: batch_mode is not 'truncate_episodes', or (with `whole_fragments`)
        train_batch_size is not a multiple of rollout_fragment_length, or the model is
        recurrent.
    """
    rounds = WorkerSettings.from_config(config)
    length = rounds.rollout_fragment_length
    if rounds.batch_mode != "truncate_episodes":
        raise errors.InvalidConfigError(
            f"batch_mode={rounds.batch_mode!r}: V-trace learns on fixed-length trajectory "
            "fragments; set batch_mode='truncate_episodes'")
    train_batch = int(config["train_batch_size"])
    if whole_fragments and train_batch % length:
        raise errors.InvalidConfigError(
            f"train_batch_size={train_batch} is not a multiple of "
            f"rollout_fragment_length={length}; the learner reads whole fragments, so set "
            f"train_batch_size to a multiple, e.g. {max(1, train_batch // length) * length}")
    if merge_model_config(config.get("model"))["use_lstm"]:
        raise errors.InvalidConfigError(
            "model.use_lstm: AsyncSamplesOptimizer learns feed-forward policies only; set "
            "use_lstm to False")


class PolicyRowsLearner:
    """The learner of a policy that is not a `build_tf_policy` one: the learner queue's
    fragments ([fragments, steps, ...] per column) become one SampleBatch of rows for the
    policy's own `learn_on_batch`."""

    def __init__(self, policy):
        self.policy = policy

    def learn_on_batch(self, columns: Dict[str, Any]) -> Dict[str, Any]:
        import tree

        rows = tree.map_structure(np.asarray, flatten_sequences(columns))
        return self.policy.learn_on_batch(SampleBatch(rows)) or {}

    def get_weights(self):
        return self.policy.get_weights()

    def set_weights(self, weights) -> None:
        self.policy.set_weights(weights)
