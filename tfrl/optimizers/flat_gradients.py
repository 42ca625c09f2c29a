"""Flat views of a policy's trainable variables, and the worker-side steps of the optimizers
that exchange gradients between actors (ShardedParameterServerOptimizer, AllreduceOptimizer).

Both strategies move gradients and weights as one flat vector (the trainable variables in the
policy's order, each raveled) cut into contiguous slices (`slice_bounds`). A slice is a plain
numpy array that Ray moves from actor to actor through its object store, so the driver only
passes object refs around and never holds the data. The functions taking a `worker` run inside
a rollout worker through `RolloutWorker.apply`.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from tfrl import errors

Bounds = List[Tuple[int, int]]


def slice_bounds(total: int, num_slices: int) -> Bounds:
    """[(start, end)] of `num_slices` contiguous slices of a vector of `total` entries, their
    sizes differing by at most one.

    Raises:
      InvalidConfigError: more slices than entries (a slice would be empty).
    """
    if not 1 <= num_slices <= total:
        raise errors.InvalidConfigError(
            f"cannot cut {total} weights into {num_slices} slices; use between 1 and {total} "
            "(num_ps_shards, or fewer workers for allreduce)")
    edges = np.linspace(0, total, num_slices + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def flat_trainable_weights(policy) -> np.ndarray:
    """The policy's trainable variables as one flat vector (a copy)."""
    return np.concatenate([np.ravel(v.numpy()) for v in policy.trainable_variables])


def assign_flat_trainable_weights(policy, flat: np.ndarray) -> None:
    """Assigns a vector from `flat_trainable_weights` back to the policy's trainable variables.

    Raises:
      InvalidBatchError: its length does not match the variables.
    """
    variables = policy.trainable_variables
    total = sum(int(np.prod(v.shape)) for v in variables)
    if len(flat) != total:
        raise errors.InvalidBatchError(
            f"got {len(flat)} flat weights for {total} trainable weights; the vector comes from a "
            "policy with another model config")
    offset = 0
    for variable in variables:
        size = int(np.prod(variable.shape))
        variable.assign(np.reshape(flat[offset:offset + size], variable.shape).astype(
            variable.dtype.as_numpy_dtype))
        offset += size


def flatten_gradients(grads: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.ravel(g) for g in grads])


def split(flat: np.ndarray, bounds: Bounds) -> List[np.ndarray]:
    return [np.ascontiguousarray(flat[a:b]) for a, b in bounds]


# --- worker-side steps (run through RolloutWorker.apply) -------------------------------------
def gradient_slices(worker, policy_id: str, bounds: Bounds, samples=None):
    """Samples one fragment (or takes `samples`), computes the gradients of `policy_id` on it and
    returns its flat gradient cut at `bounds`, followed by (learner stats, env steps, the
    episodes finished since the worker's last `get_metrics`): a tuple of len(bounds) + 1
    values, one object ref each when called with that many `num_returns`."""
    if samples is None:
        samples = worker.sample()
    worker.gradient_delay()
    grads, stats = worker.get_policy(policy_id).compute_gradients(samples)
    return (*split(flatten_gradients(grads), bounds), (stats, samples.count, worker.get_metrics()))


def set_weight_slices(worker, policy_id: str, global_vars: Optional[dict], *slices) -> None:
    """Assigns the concatenated `slices` as `policy_id`'s trainable weights, then the global vars."""
    assign_flat_trainable_weights(worker.get_policy(policy_id), np.concatenate(slices))
    if global_vars:
        worker.set_global_vars(global_vars)


def get_policy_state(worker, policy_id: str) -> dict:
    return worker.get_policy(policy_id).get_state()


def set_policy_state(worker, policy_id: str, state: dict) -> None:
    worker.get_policy(policy_id).set_state(state)


def single_trained_policy(workers, strategy: str) -> str:
    """The id of the one policy that learns, for the strategies that handle one policy.

    Raises:
      InvalidConfigError: a multi-agent env or several learning policies, or no remote workers.
    """
    local = workers.local_worker()
    if local.multi_agent or len(local.policies_to_train) != 1:
        raise errors.InvalidConfigError(
            f"{strategy} trains the one policy of a single-agent env (policies_to_train is "
            f"{local.policies_to_train}, multi-agent {local.multi_agent}); "
            "use optimizer sync_samples or async_gradients for several learning policies")
    if not workers.remote_workers():
        raise errors.InvalidConfigError(
            f"{strategy} needs remote workers to compute gradients; set num_workers >= 1")
    return local.policies_to_train[0]
