"""ShardedParameterServerOptimizer: the RLlib paper's sharded parameter server, with pipelining.

The policy's trainable weights, as one flat vector, are cut into `num_ps_shards` contiguous
slices; each slice lives in a `ParameterShard` Ray actor together with the optimizer state of
that slice (the same tf_keras optimizer as the policy's, rebuilt from its config), so every shard
applies the optimizer step to its own slice. Rollout workers sample a fragment and compute
gradients on it; the gradient comes back as one object per slice, each pushed straight to its
shard, and the shards' new slices go straight back to that worker: the bulk data moves
worker -> shard -> worker through Ray's object store, the driver only passes refs along.

Pipelining: as soon as a worker's gradient is ready the driver starts the worker's next
fragment and gradient, and only then pushes the previous gradient; the fresh weights are set
in the worker after that next gradient (Ray runs an actor's calls in the order they were
made). So a worker never waits for the shards, at the price of gradients one push older than
the synchronous baseline's (A3C's asynchronous semantics).

The driver's own policy gets the shards' weights at the end of every step (for checkpoints,
exports and evaluation). One policy learns (a single-agent env).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from tfrl.optimizers.flat_gradients import (assign_flat_trainable_weights,
                                            flat_trainable_weights, gradient_slices,
                                            set_weight_slices, single_trained_policy,
                                            slice_bounds, split)
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.settings import ShardedPSSettings


class ParameterShard:
    """One slice of the flat weights and the optimizer state of that slice (a Ray actor).

    Args:
      values: the slice's initial weights.
      optimizer_config: `tf_keras.optimizers.serialize` of the policy's optimizer.
    """

    def __init__(self, values: np.ndarray, optimizer_config: dict, tf_threads: int = 1):
        from tfrl.runtime import configure_tf_threads

        configure_tf_threads(tf_threads)
        import tensorflow as tf
        import tf_keras as keras

        self._variable = tf.Variable(values)
        self._optimizer = keras.optimizers.deserialize(optimizer_config)
        self._optimizer.build([self._variable])
        self._apply = tf.function(
            lambda grad: self._optimizer.apply_gradients([(grad, self._variable)]),
            input_signature=[tf.TensorSpec(values.shape, values.dtype)])

    def push(self, grad: np.ndarray) -> np.ndarray:
        """Applies one optimizer step with `grad`; returns the new slice."""
        self._apply(grad)
        return self._variable.numpy()

    def pull(self) -> np.ndarray:
        return self._variable.numpy()

    def set_values(self, values: np.ndarray) -> None:
        self._variable.assign(values)

    def set_learning_rate(self, learning_rate: float) -> None:
        self._optimizer.learning_rate = learning_rate


class ShardedParameterServerOptimizer(PolicyOptimizer):
    """Config keys: those of ShardedPSSettings (read once, here). One `step()` applies gradients
    until `train_batch_size` env steps were trained.

    Raises (constructor):
      InvalidConfigError: a bad train_batch_size or num_ps_shards (also more shards than
        weights), no remote workers, or several learning policies.
    """

    def __init__(self, workers, config: Optional[dict] = None, replay=None, **settings):
        import ray
        import tf_keras as keras

        super().__init__(workers, config, replay, **settings)
        self.settings = ShardedPSSettings.from_config(self.config)
        self.policy_id = single_trained_policy(workers, "ShardedParameterServerOptimizer")
        self.policy = workers.local_worker().get_policy(self.policy_id)
        flat = flat_trainable_weights(self.policy)
        self.bounds = slice_bounds(len(flat), self.settings.num_ps_shards)
        shard_class = ray.remote(num_cpus=0, max_restarts=0)(ParameterShard)
        optimizer_config = keras.optimizers.serialize(self.policy.optimizer)
        self.shards = [shard_class.remote(piece, optimizer_config)
                       for piece in split(flat, self.bounds)]
        self._learning_rate = self._policy_learning_rate()
        # info ref of a gradient in flight -> (its worker, the refs of its slices)
        self._pending: Dict[object, Tuple[object, List[object]]] = {}
        self._weight_updates: Dict[object, object] = {}  # worker -> its last set_weights ref
        self._active = False

    def _policy_learning_rate(self) -> float:
        return float(np.asarray(self.policy.optimizer.learning_rate))

    def activate(self) -> None:
        """Loads the driver policy's weights into the shards (a strategy taking over)."""
        import ray

        ray.get([shard.set_values.remote(piece) for shard, piece in
                 zip(self.shards, split(flat_trainable_weights(self.policy), self.bounds))])
        self._active = True

    def deactivate(self) -> None:
        """Waits for the gradients and weight updates in flight (their results are dropped)."""
        import ray

        in_flight = list(self._pending) + list(self._weight_updates.values())
        if in_flight:
            ray.wait(in_flight, num_returns=len(in_flight))
        self._pending.clear()
        self._weight_updates.clear()
        self._active = False

    def _launch(self, worker, weights: Optional[List[object]] = None, samples=None) -> None:
        """Starts `worker`'s next gradient (after setting `weights`, slice refs, when given)."""
        if weights is not None:
            self._send_weights(worker, weights)
        refs = worker.apply.options(num_returns=len(self.bounds) + 1).remote(
            gradient_slices, self.policy_id, self.bounds, samples)
        self._pending[refs[-1]] = (worker, refs[:-1])

    def _send_weights(self, worker, slices: List[object]) -> None:
        self._weight_updates[worker] = worker.apply.remote(
            set_weight_slices, self.policy_id, {"timestep": self.num_steps_sampled}, *slices)

    def _push(self, grad_slices: List[object]) -> List[object]:
        """Pushes one gradient's slices to their shards; returns the refs of the new slices."""
        learning_rate = self._policy_learning_rate()
        if learning_rate != self._learning_rate:  # a learning-rate schedule moved on
            for shard in self.shards:
                shard.set_learning_rate.remote(learning_rate)
            self._learning_rate = learning_rate
        return [shard.push.remote(grad) for shard, grad in zip(self.shards, grad_slices)]

    def step(self) -> dict:
        import ray

        from tfrl.rollout.worker_set import is_worker_failure

        if not self._active:
            self.activate()
        busy = {worker for worker, _ in self._pending.values()}
        for worker in self.workers.remote_workers():
            if worker not in busy:
                self._launch(worker, [shard.pull.remote() for shard in self.shards])
        trained, stats = 0, {}
        while trained < self.settings.train_batch_size:
            with self.timer("wait"):
                ready, _ = ray.wait(list(self._pending), num_returns=1)
            worker, grad_slices = self._pending.pop(ready[0])
            try:
                stats, count = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - a dead worker is replaced, others re-raise
                if not is_worker_failure(exc) or worker not in self.workers.remote_workers():
                    raise
                self._weight_updates.pop(worker, None)
                worker = self.workers.recreate_worker(worker, exc)
                if worker is not None:
                    self._launch(worker, [shard.pull.remote() for shard in self.shards])
                continue
            self._launch(worker)  # overlaps the push below (pipelining)
            with self.timer("push"):
                self._send_weights(worker, self._push(grad_slices))
            trained += count
            self.num_steps_sampled += count
            self.num_steps_trained += count
            self.policy.on_global_var_update({"timestep": self.num_steps_sampled})
        with self.timer("pull"):
            self._pull_into_driver_policy()
        self.learner_stats = {self.policy_id: stats}
        return self.learner_stats

    def _pull_into_driver_policy(self) -> None:
        import ray

        assign_flat_trainable_weights(
            self.policy, np.concatenate(ray.get([shard.pull.remote() for shard in self.shards])))

    def step_on_samples(self, batches: list) -> None:
        """A deterministic step: one gradient per batch in `batches` (SampleBatches or their
        object refs), each computed by a remote worker in turn on the weights the shards hold
        then, pushed and applied before the next (no pipelining); the driver policy gets the
        result. For checking the strategy against another on the same data."""
        import ray

        self.deactivate()  # nothing in flight
        self.activate()
        workers = self.workers.remote_workers()
        for i, batch in enumerate(batches):
            worker = workers[i % len(workers)]
            self._launch(worker, [shard.pull.remote() for shard in self.shards], batch)
            info_ref = next(iter(self._pending))
            _, grad_slices = self._pending.pop(info_ref)
            ray.get(self._push(grad_slices))
            count = ray.get(info_ref)[1]
            self.num_steps_sampled += count
            self.num_steps_trained += count
        self._pull_into_driver_policy()

    def stop(self) -> None:
        import ray

        self._pending.clear()
        self._weight_updates.clear()
        for shard in self.shards:
            ray.kill(shard, no_restart=True)
        self.shards = []
        super().stop()
