"""Classic `ray.rllib.models.torch.recurrent_net` without torch (models/torch/__init__.py)."""
from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2


class RecurrentNetwork(TorchModelV2):
    """Classic RLlib's torch recurrent base (stand-in). It declares `forward_rnn`, as classic
    RLlib's did, so a torch model class that overrides it (`@override(RecurrentNetwork)`) is
    defined at import time; constructing one is refused like every torch model."""

    def forward_rnn(self, inputs, state, seq_lens):
        """The recurrent pass over [B, T, ...] inputs (classic); never reached without torch."""
        raise NotImplementedError


__all__ = ["RecurrentNetwork"]
