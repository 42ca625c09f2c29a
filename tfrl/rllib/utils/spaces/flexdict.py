"""Classic `ray.rllib.utils.spaces.flexdict`."""
from tfrl.spaces.flex_dict import FlexDict

__all__ = ["FlexDict"]
