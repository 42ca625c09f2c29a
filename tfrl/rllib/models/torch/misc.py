"""Classic `ray.rllib.models.torch.misc` without torch: SlimFC (a stand-in torch layer) and the
framework-free helpers normc_initializer, same_padding, valid_padding."""
import numpy as np

from tfrl.rllib.utils.framework import _TorchModuleStandIn


class SlimFC(_TorchModuleStandIn):
    """Classic RLlib's torch dense layer (stand-in; construction refused)."""


def normc_initializer(std: float = 1.0):
    """Classic torch normc initializer; its initializer needs a torch tensor, so calling it
    raises FrameworkNotAvailableError."""
    def initializer(tensor):
        _TorchModuleStandIn()
    return initializer


def same_padding(in_size, filter_size, stride_size):
    """((pad_left, pad_right, pad_top, pad_bottom), output size) of 'same' padding."""
    in_height, in_width = in_size
    filter_height, filter_width = ((filter_size, filter_size) if isinstance(filter_size, int)
                                   else filter_size)
    stride_height, stride_width = ((stride_size, stride_size) if isinstance(stride_size, int)
                                   else stride_size)
    out_height = int(np.ceil(float(in_height) / float(stride_height)))
    out_width = int(np.ceil(float(in_width) / float(stride_width)))
    pad_along_height = int((out_height - 1) * stride_height + filter_height - in_height)
    pad_along_width = int((out_width - 1) * stride_width + filter_width - in_width)
    pad_top = pad_along_height // 2
    pad_left = pad_along_width // 2
    padding = (pad_left, pad_along_width - pad_left, pad_top, pad_along_height - pad_top)
    return padding, (out_height, out_width)


def valid_padding(in_size, filter_size, stride_size):
    """((pad_height, pad_width), output size) of 'valid' padding."""
    in_height, in_width = in_size
    filter_height, filter_width = filter_size
    stride_height, stride_width = stride_size
    out_height = int(np.ceil((in_height - filter_height + 1) / float(stride_height)))
    out_width = int(np.ceil((in_width - filter_width + 1) / float(stride_width)))
    return (filter_height, filter_width), (out_height, out_width)


__all__ = ["SlimFC", "normc_initializer", "same_padding", "valid_padding"]
