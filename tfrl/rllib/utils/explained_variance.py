"""Classic `ray.rllib.utils.explained_variance` (Ray 0.8)."""
from tfrl.utils.tf_ops import explained_variance

__all__ = ["explained_variance"]
