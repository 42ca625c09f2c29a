"""Classic `ray.rllib.agents.marwil.marwil_torch_policy` as classic RLlib has it without torch installed:
`MARWILTorchPolicy` imports and derives; constructing it raises an ImportError naming MARWILTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

MARWILTorchPolicy = torch_policy_stand_in("MARWILTorchPolicy", "MARWILTFPolicy")

__all__ = ["MARWILTorchPolicy"]
