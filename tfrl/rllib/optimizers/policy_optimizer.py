"""Classic `ray.rllib.optimizers.policy_optimizer`."""
from tfrl.optimizers.policy_optimizer import PolicyOptimizer

__all__ = ["PolicyOptimizer"]
