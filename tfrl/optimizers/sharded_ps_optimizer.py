"""ShardedParameterServerOptimizer: the RLlib paper's sharded parameter server, with pipelining.

The policy's trainable weights, as one flat vector, are cut into `num_ps_shards` contiguous slices;
each slice lives in a `ParameterShard` Ray actor together with the optimizer state of that slice
(the same optimizer as the policy's, rebuilt from its tf_keras config), so every shard applies the
optimizer step to its own slice: in numpy for SGD, Adam and RMSprop (slice_optimizers.py; such a
shard needs no TensorFlow), else with tf_keras. Rollout workers sample a fragment and compute
gradients on it; the gradient comes back as one object per slice, each pushed straight to its
shard, and the shards' new slices go straight back to that worker: the bulk data moves worker ->
shard -> worker through Ray's object store, the driver only passes refs along.

Pipelining: as soon as a worker's gradient is ready the driver starts the worker's next
fragment and gradient, and only then pushes the previous gradient; the fresh weights are set
in the worker after that next gradient (Ray runs an actor's calls in the order they were
made). So a worker never waits for the shards, at the price of gradients one push older than
the synchronous baseline's (A3C's asynchronous semantics).

The driver's own policy gets the shards' weights at the end of every step (for checkpoints,
exports and evaluation), and the driver keeps a copy of every shard's whole state (its slice
and its optimizer variables: Adam's moments and iteration count) taken then. That copy is what
a trainer checkpoint stores (`save`/`restore`), and what a shard actor that died is recreated
from: the step that finds it dead recreates it with that state, logs a warning and counts it
under `info/optimizer/num_shard_failures`; the gradients pushed to it since that copy are lost
(the other shards keep theirs), and training goes on. One policy learns (a single-agent env).
"""
from __future__ import annotations

import logging
from typing import Dict, List, Optional, Tuple

import numpy as np

from tfrl import errors
from tfrl.optimizers.flat_gradients import (assign_flat_trainable_weights,
                                            flat_trainable_weights, gradient_slices,
                                            set_weight_slices, single_trained_policy,
                                            slice_bounds, split)
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.settings import ShardedPSSettings

logger = logging.getLogger(__name__)

_SHARD_FAILURES_REPORTED = 10


class ParameterShard:
    """One slice of the flat weights and the optimizer state of that slice (a Ray actor).

    The optimizer step is numpy's (slice_optimizers.py) when it repeats the policy's optimizer
    exactly, so the actor starts without TensorFlow; else it is the tf_keras optimizer itself.

    Args:
      values: the slice's initial weights.
      optimizer_config: `tf_keras.optimizers.serialize` of the policy's optimizer.
    """

    def __init__(self, values: np.ndarray, optimizer_config: dict, tf_threads: int = 1):
        from tfrl.optimizers.slice_optimizers import slice_optimizer

        self._values = np.array(values)
        self._numpy = slice_optimizer(optimizer_config, self._values.size, self._values.dtype)
        if self._numpy is None:
            self._keras = _KerasSlice(self._values, optimizer_config, tf_threads)

    def push(self, grad: np.ndarray) -> np.ndarray:
        """Applies one optimizer step with `grad`; returns the new slice."""
        if self._numpy is None:
            return self._keras.push(grad)
        self._values = self._numpy.apply(self._values, grad)
        return self._values

    def ping(self) -> bool:
        return True

    def pull(self) -> np.ndarray:
        return self._values if self._numpy is not None else self._keras.pull()

    def get_state(self) -> dict:
        """The slice and the optimizer's variables (iteration count and slots), as arrays in
        tf_keras's order."""
        if self._numpy is None:
            return self._keras.get_state()
        return {"values": self._values.copy(), "optimizer": self._numpy.get_state()}

    def set_state(self, state: dict) -> None:
        if self._numpy is None:
            self._keras.set_state(state)
            return
        self._values = np.array(state["values"], dtype=self._values.dtype)
        self._numpy.set_state(state["optimizer"])

    def set_values(self, values: np.ndarray) -> None:
        if self._numpy is None:
            self._keras.set_values(values)
        else:
            self._values = np.array(values, dtype=self._values.dtype)

    def set_learning_rate(self, learning_rate: float) -> None:
        if self._numpy is None:
            self._keras.set_learning_rate(learning_rate)
        else:
            self._numpy.learning_rate = float(learning_rate)


class _KerasSlice:
    """A slice stepped by the tf_keras optimizer itself (optimizers numpy does not repeat)."""

    def __init__(self, values: np.ndarray, optimizer_config: dict, tf_threads: int):
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
        self._apply(grad)
        return self._variable.numpy()

    def pull(self) -> np.ndarray:
        return self._variable.numpy()

    def get_state(self) -> dict:
        return {"values": self._variable.numpy(),
                "optimizer": [v.numpy() for v in self._optimizer.variables]}

    def set_state(self, state: dict) -> None:
        self._variable.assign(state["values"])
        for variable, value in zip(self._optimizer.variables, state["optimizer"]):
            variable.assign(value)

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
    Raises (restore):
      CheckpointError: the checkpoint's shards do not fit (another num_ps_shards or model).
    """

    results_bring_episodes = True  # every gradient

    def __init__(self, workers, config: Optional[dict] = None, replay=None, **settings):
        import ray
        import tf_keras as keras

        super().__init__(workers, config, replay, **settings)
        self.settings = ShardedPSSettings.from_config(self.config)
        self.policy_id = single_trained_policy(workers, "ShardedParameterServerOptimizer")
        self.policy = workers.local_worker().get_policy(self.policy_id)
        flat = flat_trainable_weights(self.policy)
        self.bounds = slice_bounds(len(flat), self.settings.num_ps_shards)
        self._shard_class = ray.remote(num_cpus=0, max_restarts=0)(ParameterShard)
        self._optimizer_config = keras.optimizers.serialize(self.policy.optimizer)
        self.shards = [self._shard_class.remote(piece, self._optimizer_config)
                       for piece in split(flat, self.bounds)]
        self._learning_rate = self._policy_learning_rate()
        # the driver's copy of each shard's state ("optimizer" None: a fresh optimizer), and
        # the sampled timesteps when it was taken
        self._shard_states: List[dict] = [{"values": piece, "optimizer": None}
                                          for piece in split(flat, self.bounds)]
        self._shard_states_timesteps = 0
        self.num_shard_failures = 0
        self.shard_failures: List[dict] = []
        # info ref of a gradient in flight -> (its worker, the refs of its slices)
        self._pending: Dict[object, Tuple[object, List[object]]] = {}
        self._weight_updates: Dict[object, object] = {}  # worker -> its last set_weights ref
        self._active = False
        self._started: Optional[List[object]] = None  # ping refs of ready()

    def _policy_learning_rate(self) -> float:
        return float(np.asarray(self.policy.optimizer.learning_rate))

    def activate(self) -> None:
        """Loads the driver policy's weights into the shards (a strategy taking over)."""
        pieces = split(flat_trainable_weights(self.policy), self.bounds)
        self._on_every_shard(lambda: [shard.set_values.remote(piece)
                                      for shard, piece in zip(self.shards, pieces)])
        for state, piece in zip(self._shard_states, pieces):
            state["values"] = piece
        self._active = True

    def ready(self) -> bool:
        """Whether every shard actor has started (asked once per actor, without waiting)."""
        import ray

        if self._started is None:
            self._started = [shard.ping.remote() for shard in self.shards]
        done, _ = ray.wait(self._started, num_returns=len(self._started), timeout=0)
        return len(done) == len(self._started)

    def deactivate(self) -> None:
        """Waits for the gradients and weight updates in flight (their results are dropped, the
        episodes they bring kept)."""
        import ray

        in_flight = list(self._pending) + list(self._weight_updates.values())
        if in_flight:
            ray.wait(in_flight, num_returns=len(in_flight))
        self._keep_episodes_of(list(self._pending))
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
                stats, count, episodes = ray.get(ready[0])
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
            self._new_episodes.extend(episodes)
            self.num_steps_sampled += count
            self.num_steps_trained += count
            self.policy.on_global_var_update({"timestep": self.num_steps_sampled})
        with self.timer("pull"):
            self._pull_into_driver_policy()
        self.learner_stats = {self.policy_id: stats}
        return self.learner_stats

    def _pull_into_driver_policy(self) -> None:
        """The shards' whole states become the driver's copy, their slices its policy's weights."""
        states = self._shard_states = self._fetch_shard_states()
        self._shard_states_timesteps = self.num_steps_sampled
        assign_flat_trainable_weights(self.policy, np.concatenate([s["values"] for s in states]))

    def _fetch_shard_states(self) -> List[dict]:
        return self._on_every_shard(lambda: [shard.get_state.remote() for shard in self.shards])

    # --- shard failures -----------------------------------------------------------------------
    def _on_every_shard(self, calls):
        """`ray.get` of the refs `calls()` returns, one call per shard; when a shard actor is dead,
        the dead ones are recreated (`recover_dead_shards`) and the calls made again."""
        import ray

        try:
            return ray.get(calls())
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            if not self.recover_dead_shards(exc):
                raise
            return ray.get(calls())

    def recover_dead_shards(self, error: Optional[BaseException] = None) -> List[int]:
        """Recreates every shard actor that died from the driver's copy of its state (taken at the
        end of the last step); returns their indices. The workers get the recreated slices with
        their next weights."""
        import ray

        dead = []
        for index, shard in enumerate(self.shards):
            try:
                ray.get(shard.ping.remote())
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                dead.append(index)
        if dead:
            self._started = None  # ready() asks the new actors
        for index in dead:
            ray.kill(self.shards[index], no_restart=True)
            self.shards[index] = self._new_shard(self._shard_states[index])
            self.num_shard_failures += 1
            event = {"shard": index, "timesteps": self.num_steps_sampled,
                     "restored_from_timesteps": self._shard_states_timesteps}
            self.shard_failures = (self.shard_failures + [event])[-_SHARD_FAILURES_REPORTED:]
            logger.warning(
                "sharded_ps: parameter shard %d of %d died (%s); recreated from the driver's copy "
                "of its weights and optimizer state at timestep %d (the gradients pushed to it "
                "since are lost); training goes on", index, len(self.shards),
                type(error).__name__ if error is not None else "found dead",
                self._shard_states_timesteps)
        return dead

    def _new_shard(self, state: dict):
        shard = self._shard_class.remote(state["values"], self._optimizer_config)
        if state["optimizer"] is not None:
            shard.set_state.remote(state)  # Ray runs an actor's calls in order
        shard.set_learning_rate.remote(self._learning_rate)
        return shard

    # --- checkpoints and reporting ------------------------------------------------------------
    def save(self) -> dict:
        """The counters plus every shard's slice and optimizer variables (the driver's copy from
        the end of the last step; asked from the shards when there is none yet)."""
        if any(state["optimizer"] is None for state in self._shard_states):
            self._shard_states = self._fetch_shard_states()
        shards = [{"values": s["values"], "optimizer": list(s["optimizer"])}
                  for s in self._shard_states]
        return dict(super().save(), ps_shards=shards)

    def restore(self, state: dict) -> None:
        """Restores the counters and, when the checkpoint has them (`save` of this strategy),
        every shard's slice and optimizer variables. Gradients in flight are dropped."""
        super().restore(state)
        saved = state.get("ps_shards")
        if saved is None:
            return  # another strategy's checkpoint: the shards take the driver's weights
        self.deactivate()
        restored = self._fitting_states(saved, self._fetch_shard_states())
        self._on_every_shard(lambda: [shard.set_state.remote(s)
                                      for shard, s in zip(self.shards, restored)])
        self._shard_states = restored
        self._shard_states_timesteps = self.num_steps_sampled

    @staticmethod
    def _fitting_states(saved, live: List[dict]) -> List[dict]:
        """`saved` as arrays, checked against the shapes of the shards' `live` states."""
        def shapes(states):
            return [(np.shape(s["values"]), [np.shape(v) for v in s["optimizer"]])
                    for s in states]

        try:
            restored = [{"values": np.asarray(s["values"]),
                         "optimizer": [np.asarray(v) for v in s["optimizer"]]} for s in saved]
        except (KeyError, TypeError) as exc:
            raise errors.CheckpointError(
                f"the checkpoint's ps_shards entry is malformed ({exc!r}); pass what save() "
                "returned") from exc
        if shapes(restored) != shapes(live):
            raise errors.CheckpointError(
                f"the checkpoint's parameter shards {shapes(restored)} (slice shape, optimizer "
                f"variable shapes) do not fit this trainer's {shapes(live)}; restore with the "
                "num_ps_shards, model config and optimizer the checkpoint was saved with")
        return restored

    def stats(self) -> dict:
        out = super().stats()
        out["optimizer"] = {"num_ps_shards": len(self.bounds),
                            "num_shard_failures": self.num_shard_failures,
                            "shard_failures": list(self.shard_failures)}
        return out

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
            _, count, episodes = ray.get(info_ref)
            self._new_episodes.extend(episodes)
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
