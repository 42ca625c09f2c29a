"""Classic `ray.rllib.models.torch.torch_modelv2` without torch: TorchModelV2 to derive from;
construction refused (models/torch/__init__.py)."""
from tfrl.rllib.utils.framework import _TorchModuleStandIn


class TorchModelV2(_TorchModuleStandIn):
    """Classic RLlib's torch ModelV2 base (stand-in; use TFModelV2)."""


__all__ = ["TorchModelV2"]
