"""Classic `ray.rllib.evaluation.worker_set`."""
from tfrl.rollout.worker_set import WorkerSet

__all__ = ["WorkerSet"]
