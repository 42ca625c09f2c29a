"""Classic `ray.rllib.agents.ppo.appo_torch_policy` as classic RLlib has it without torch installed:
`AsyncPPOTorchPolicy` imports and derives; constructing it raises an ImportError naming AsyncPPOTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

AsyncPPOTorchPolicy = torch_policy_stand_in("AsyncPPOTorchPolicy", "AsyncPPOTFPolicy")

__all__ = ["AsyncPPOTorchPolicy"]
