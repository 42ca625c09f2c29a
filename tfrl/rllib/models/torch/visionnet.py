"""Classic `ray.rllib.models.torch.visionnet` without torch (models/torch/__init__.py)."""
from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2


class VisionNetwork(TorchModelV2):
    """Classic RLlib's torch vision network (stand-in; use the TF one)."""


__all__ = ["VisionNetwork"]
