"""Classic `ray.rllib.agents.sac.sac_torch_policy` as classic RLlib has it without torch installed:
`SACTorchPolicy` imports and derives; constructing it raises an ImportError naming SACTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

SACTorchPolicy = torch_policy_stand_in("SACTorchPolicy", "SACTFPolicy")

__all__ = ["SACTorchPolicy"]
