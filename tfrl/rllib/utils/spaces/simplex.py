"""Classic `ray.rllib.utils.spaces.simplex`."""
from tfrl.spaces.simplex import Simplex

__all__ = ["Simplex"]
