"""Ape-X's per-worker exploration and target network, set inside rollout workers.

Where it sits: the AsyncReplayOptimizer (async_replay_optimizer.py) runs these functions in its
remote rollout workers (`worker.apply`). They live apart from the optimizer, and import no
TensorFlow, because a function shipped to a worker imports its module there: a worker that acts
in numpy (NumpyQPolicy) would otherwise start TensorFlow for nothing.
"""
from __future__ import annotations

from tfrl import errors


def per_worker_epsilon(index: int, num_workers: int, epsilon: float = 0.4,
                       alpha: float = 7.0) -> float:
    """Ape-X's exploration rate of worker `index` (0-based) of `num_workers`:
    eps ** (1 + index / (num_workers - 1) * alpha); eps for a single worker.

    Raises:
      InvalidConfigError: index outside [0, num_workers).
    """
    if not 0 <= index < num_workers:
        raise errors.InvalidConfigError(
            f"worker index {index} is outside [0, {num_workers}) for per-worker exploration")
    if num_workers == 1:
        return float(epsilon)
    return float(epsilon ** (1.0 + index / (num_workers - 1) * alpha))


def set_worker_epsilon(worker, num_workers: int, epsilon: float, alpha: float) -> float:
    """Runs inside a rollout worker: gives each of its policies that explores the worker's
    constant exploration rate (remote worker i+1 is worker index i of the formula): epsilon
    for epsilon-greedy policies (DQN), the scale of the action noise for deterministic actors
    (DDPG, as RLlib's per-worker Ornstein-Uhlenbeck noise)."""
    from tfrl.utils.schedules import ConstantSchedule

    index = min(max(worker.worker_index - 1, 0), num_workers - 1)
    value = per_worker_epsilon(index, num_workers, epsilon, alpha)
    for policy in worker.policy_map.values():
        if hasattr(policy, "set_epsilon_schedule"):
            policy.set_epsilon_schedule(ConstantSchedule(value))
        elif hasattr(policy, "set_noise_scale_schedule"):
            policy.set_noise_scale_schedule(ConstantSchedule(value))
    return value


def set_worker_target(worker, policy_id: str, target_weights) -> None:
    """Runs inside a rollout worker: the learner's target network, so the worker's TD errors
    (its initial priorities) use the same target as the learner's."""
    worker.get_policy(policy_id).set_target_weights(target_weights)
