"""Classic `ray.rllib.agents.dqn.dqn_torch_model` as classic RLlib has it without torch installed:
`DQNTorchModel` to derive from (classic modules define a torch Q model beside their
`DistributionalQTFModel` one); constructing it raises FrameworkNotAvailableError."""
from tfrl.rllib.models.torch.torch_modelv2 import TorchModelV2


class DQNTorchModel(TorchModelV2):
    """Classic RLlib's torch Q model base (stand-in; use
    `agents.dqn.distributional_q_tf_model.DistributionalQTFModel`)."""


__all__ = ["DQNTorchModel"]
