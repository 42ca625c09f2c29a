"""Classic `ray.rllib.models.action_dist`."""
from tfrl.models.distributions import ActionDistribution

__all__ = ["ActionDistribution"]
