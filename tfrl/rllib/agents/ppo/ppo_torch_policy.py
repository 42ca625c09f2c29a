"""Classic `ray.rllib.agents.ppo.ppo_torch_policy` as classic RLlib has it without torch installed:
`PPOTorchPolicy` imports and derives; constructing it raises an ImportError naming PPOTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

PPOTorchPolicy = torch_policy_stand_in("PPOTorchPolicy", "PPOTFPolicy")

__all__ = ["PPOTorchPolicy"]
