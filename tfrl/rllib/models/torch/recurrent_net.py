"""Classic `ray.rllib.models.torch.recurrent_net` without torch (models/torch/__init__.py)."""
from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2


class RecurrentNetwork(TorchModelV2):
    """Classic RLlib's torch recurrent base (stand-in)."""


__all__ = ["RecurrentNetwork"]
