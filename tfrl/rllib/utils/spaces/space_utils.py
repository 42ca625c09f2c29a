"""Classic `ray.rllib.utils.spaces.space_utils`."""
from tfrl.spaces.structure import (flatten_space, flatten_to_single_ndarray,
                                   get_base_struct_from_space, unbatch)

__all__ = ["flatten_space", "get_base_struct_from_space", "flatten_to_single_ndarray",
           "unbatch"]
