"""Classic `ray.rllib.utils.spaces.repeated`."""
from tfrl.spaces.repeated import Repeated

__all__ = ["Repeated"]
