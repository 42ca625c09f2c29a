"""Classic `ray.rllib.policy.policy`."""
from tfrl.policy.policy import Policy

__all__ = ["Policy"]
