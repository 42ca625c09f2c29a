"""Classic `ray.rllib.utils.torch_ops` without torch: the float bounds classic modules import,
and the tensor helpers, which raise FrameworkNotAvailableError (tfrl runs TensorFlow only)."""
import numpy as np

from tfrl.rllib.utils.framework import _TorchModuleStandIn

FLOAT_MIN = float(np.finfo(np.float32).min)
FLOAT_MAX = float(np.finfo(np.float32).max)


def convert_to_torch_tensor(*args, **kwargs):
    """Raises FrameworkNotAvailableError: there are no torch tensors in tfrl."""
    _TorchModuleStandIn()


def sequence_mask(*args, **kwargs):
    """Raises FrameworkNotAvailableError: there are no torch tensors in tfrl."""
    _TorchModuleStandIn()


__all__ = ["FLOAT_MIN", "FLOAT_MAX", "convert_to_torch_tensor", "sequence_mask"]
