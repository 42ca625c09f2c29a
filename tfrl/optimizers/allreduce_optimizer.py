"""AllreduceOptimizer: minibatch SGD on every rollout worker's own samples, gradients averaged by
allreduce, each worker applying the same step to its own copy of the policy.

The RLlib paper's Table 3 compares local multi-device SGD with this: the evaluators keep their
samples, compute gradients on their own share of every minibatch, average the gradients among
themselves and each apply the average with its own optimizer. Their weights (and optimizer
slots) stay identical without a central copy: the driver only coordinates, and copies one
worker's weights into its own policy after each step for checkpoints, exports and evaluation.

How the allreduce is done. Ray's collective library (`ray.util.collective`) would be the
well-kept choice, but on a CPU-only install it has no backend: its NCCL backend needs GPUs and
cupy, and its gloo backend needs torch (Ray 2.x) or pygloo (older Ray), neither of which is a
dependency (`ray.util.collective.gloo_available()` is False here). So the allreduce is a
reduce-scatter followed by an all-gather over the rollout worker actors themselves, written
with Ray object refs: each worker returns its flat gradient as N slices (one object each),
worker j averages slice j of all workers, and every worker concatenates the N averaged slices
and applies them. Each worker sends and receives (N-1)/N of a gradient per phase, the same
traffic as a ring allreduce, in two hops instead of 2(N-1). The driver submits the whole
step's chain of calls at once (each call's inputs are the refs of the calls it waits for; Ray
runs an actor's calls in the order they were made), and waits only for the end of the step.

One policy learns (a feed-forward policy of a single-agent env); a minibatch is
`sgd_minibatch_size / N` rows of each worker's share, so equal shares make the averaged
gradient the gradient of the mean loss over the whole minibatch, as the synchronous learner
computes it (gradient clipping acts on each worker's gradient before the average).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional

import numpy as np

from tfrl import errors
from tfrl.optimizers.flat_gradients import (flatten_gradients, get_policy_state,
                                            set_policy_state, single_trained_policy,
                                            slice_bounds, split)
from tfrl.optimizers.policy_optimizer import PolicyOptimizer
from tfrl.optimizers.settings import AllreduceSettings

# the worker process's share of the current train batch, by id of its RolloutWorker
_LOCAL_BATCHES: Dict[int, dict] = {}


# --- worker-side steps (run through RolloutWorker.apply) -------------------------------------
def _sample_share(worker, policy_id: str, rows: int, global_vars: dict, extra_state: dict,
                  batches=None):
    """Sets the driver's global vars and mixin state (e.g. PPO's KL coefficient), then samples
    fragments until `rows` rows are in (or takes `batches`) and keeps them as this worker's
    share. Returns (env steps, rows)."""
    from tfrl.policy.sample_batch import concat_samples

    worker.set_global_vars(global_vars)
    policy = worker.get_policy(policy_id)
    if extra_state:
        policy.set_state(dict(policy.get_state(), extra=extra_state))
    if batches is None:
        batches, count = [], 0
        while count < rows:
            batches.append(worker.sample())
            count += batches[-1].count
    batch = concat_samples(list(batches))
    _LOCAL_BATCHES[id(worker)] = {"batch": batch, "epoch": None, "shuffled": batch}
    return sum(b.count for b in batches), batch.count


def _apply_average(worker, policy_id: str, averaged: List[np.ndarray]) -> None:
    policy = worker.get_policy(policy_id)
    flat = np.concatenate(averaged)
    grads, offset = [], 0
    for variable in policy.trainable_variables:
        size = int(np.prod(variable.shape))
        grads.append(np.reshape(flat[offset:offset + size], variable.shape))
        offset += size
    policy.apply_gradients(grads)


def _minibatch_gradient(worker, policy_id: str, bounds, epoch: Optional[int], index: int,
                        minibatch_rows: int, shuffle: bool, *averaged):
    """Applies the previous averaged gradient (`averaged`, its slices) if given; then, unless
    `epoch` is None, computes the gradient on minibatch `index` of `epoch` of this worker's
    share and returns its slices followed by the learner stats."""
    if averaged:
        _apply_average(worker, policy_id, list(averaged))
    if epoch is None:
        return None
    share = _LOCAL_BATCHES[id(worker)]
    if share["epoch"] != epoch:
        share["epoch"] = epoch
        share["shuffled"] = share["batch"].shuffle() if shuffle else share["batch"]
    start = index * minibatch_rows
    minibatch = share["shuffled"].slice(start, start + minibatch_rows)
    worker.gradient_delay()
    grads, stats = worker.get_policy(policy_id).compute_gradients(minibatch)
    return (*split(flatten_gradients(grads), bounds), stats)


def _average(_worker, *slices) -> np.ndarray:
    return np.mean(np.stack(slices), axis=0)


def _drop_share(worker) -> None:
    _LOCAL_BATCHES.pop(id(worker), None)


class AllreduceOptimizer(PolicyOptimizer):
    """Config keys: those of AllreduceSettings (read once, here). One `step()`: every remote
    worker samples train_batch_size / N env steps, then `num_sgd_iter` epochs of minibatch steps,
    each an allreduce of the workers' gradients applied by every worker.

    Raises (constructor):
      InvalidConfigError: a bad setting, no remote workers, several learning policies, or a
        recurrent policy.
    """

    def __init__(self, workers, config: Optional[dict] = None, replay=None, **settings):
        super().__init__(workers, config, replay, **settings)
        self.settings = AllreduceSettings.from_config(self.config)
        self.policy_id = single_trained_policy(workers, "AllreduceOptimizer")
        self.policy = workers.local_worker().get_policy(self.policy_id)
        if self.policy.is_recurrent():
            raise errors.InvalidConfigError(
                "AllreduceOptimizer cuts each worker's rows into minibatches and handles "
                "feed-forward policies only; use optimizer sync_samples or multi_device for a "
                "recurrent model")
        self.num_weights = sum(int(np.prod(v.shape)) for v in self.policy.trainable_variables)
        self._synced: set = set()  # workers holding the common policy state
        self._active = False

    # --- handing over between strategies --------------------------------------------------
    def activate(self) -> None:
        """The workers take the driver policy's whole state (weights and optimizer slots)."""
        self._synced.clear()
        self._sync_workers(self.workers.remote_workers(), self.policy.get_state())
        self._active = True

    def deactivate(self) -> None:
        """The driver policy takes a worker's whole state, so the next strategy goes on from it."""
        import ray

        source = self._synced_worker()
        if source is not None:
            self.policy.set_state(ray.get(source.apply.remote(get_policy_state, self.policy_id)))
        self._active = False

    def _synced_worker(self):
        return next((w for w in self.workers.remote_workers() if w in self._synced), None)

    def _sync_workers(self, workers: list, state: dict) -> None:
        import ray

        state_ref = ray.put(state)
        self.workers.gather([(w, w.apply.remote(set_policy_state, self.policy_id, state_ref))
                             for w in workers])
        self._synced.update(workers)

    def _sync_new_workers(self, workers: list) -> None:
        """Workers that joined (or were recreated) get the state of one that was in sync."""
        import ray

        new = [w for w in workers if w not in self._synced]
        if not new:
            return
        source = self._synced_worker()
        state = (ray.get(source.apply.remote(get_policy_state, self.policy_id))
                 if source is not None else self.policy.get_state())
        self._synced.intersection_update(workers)
        self._sync_workers(new, state)

    # --- one step ---------------------------------------------------------------------------
    def step(self) -> dict:
        return self._step(None)

    def step_on_samples(self, batches: list) -> dict:
        """A deterministic step on given data: remote worker i takes `batches[i]` (a SampleBatch
        or its object ref) as its share instead of sampling. For checking the strategy against
        another on the same data."""
        return self._step(batches)

    def _step(self, batches: Optional[list]) -> dict:
        import ray

        from tfrl.rollout.worker_set import is_worker_failure

        if not self._active:
            self.activate()
        workers = self.workers.remote_workers()
        self._sync_new_workers(workers)
        n = len(workers)
        share = math.ceil(self.settings.train_batch_size / n)
        global_vars = {"timestep": self.num_steps_sampled}
        extra = self.policy.get_state().get("extra", {})
        try:
            with self.timer("sample"):
                counts = ray.get([
                    w.apply.remote(_sample_share, self.policy_id, share, global_vars, extra,
                                   None if batches is None else [batches[i]])
                    for i, w in enumerate(workers)])
            rows = min(r for _, r in counts)
            minibatch = self.settings.sgd_minibatch_size
            minibatch_rows = min(math.ceil(minibatch / n), rows) if minibatch else rows
            per_epoch = max(rows // minibatch_rows, 1)
            bounds = slice_bounds(self.num_weights, min(n, self.num_weights))
            with self.timer("learn"):
                stats = self._allreduce_epochs(workers, bounds, per_epoch, minibatch_rows)
        except Exception as exc:  # noqa: BLE001 - dead workers are replaced, others re-raise
            if not is_worker_failure(exc):
                raise
            self._replace_dead_workers(workers, exc)
            return self.learner_stats
        finally:
            for w in workers:
                w.apply.remote(_drop_share)
        steps = sum(c for c, _ in counts)
        self.num_steps_sampled += steps
        self.num_steps_trained += n * per_epoch * minibatch_rows * self.settings.num_sgd_iter
        weights = ray.get(workers[0].get_weights.remote([self.policy_id]))
        self.policy.set_weights(weights[self.policy_id])
        self.policy.on_global_var_update({"timestep": self.num_steps_sampled})
        self.learner_stats = {self.policy_id: stats}
        return self.learner_stats

    def _allreduce_epochs(self, workers: list, bounds, per_epoch: int, minibatch_rows: int):
        """Submits every minibatch round of the step (gradient slices -> averaged slice per
        worker -> applied by all), waits for the last, returns the workers' mean stats."""
        import ray

        n, averaged, stats_refs = len(workers), [], []
        rounds = [(epoch, index) for epoch in range(self.settings.num_sgd_iter)
                  for index in range(per_epoch)] + [(None, 0)]
        for epoch, index in rounds:
            outputs = [w.apply.options(num_returns=1 if epoch is None else len(bounds) + 1).remote(
                _minibatch_gradient, self.policy_id, bounds, epoch, index, minibatch_rows,
                self.settings.shuffle_sequences, *averaged) for w in workers]
            if epoch is None:
                ray.get(outputs)
                break
            stats_refs = [out[-1] for out in outputs]
            averaged = [workers[j % n].apply.remote(_average, *[out[j] for out in outputs])
                        for j in range(len(bounds))]
        per_worker = ray.get(stats_refs)
        return {key: float(np.mean([s[key] for s in per_worker])) for key in per_worker[0]}

    def _replace_dead_workers(self, workers: list, error: BaseException) -> None:
        import ray

        for worker in workers:
            try:
                ray.get(worker.ping.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - any failure to answer means replace it
                self._synced.discard(worker)
                self.workers.recreate_worker(worker, error)
