"""Classic `ray.rllib.execution.train_ops` (`tfrl.execution.train_ops`)."""
from tfrl.execution.train_ops import TrainOneStep, UpdateTargetNetwork

__all__ = ["TrainOneStep", "UpdateTargetNetwork"]
