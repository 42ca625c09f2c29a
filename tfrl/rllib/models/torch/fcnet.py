"""Classic `ray.rllib.models.torch.fcnet` without torch (models/torch/__init__.py)."""
from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2


class FullyConnectedNetwork(TorchModelV2):
    """Classic RLlib's torch fully connected network (stand-in; use the TF one)."""


__all__ = ["FullyConnectedNetwork"]
