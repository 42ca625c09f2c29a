"""Classic `ray.rllib.evaluation.rollout_worker`."""
from tfrl.rollout.rollout_worker import RolloutWorker

__all__ = ["RolloutWorker"]
