"""Classic `ray.rllib.agents.dqn.dqn_torch_policy` as classic RLlib has it without torch installed:
`DQNTorchPolicy` imports and derives; constructing it raises an ImportError naming DQNTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

DQNTorchPolicy = torch_policy_stand_in("DQNTorchPolicy", "DQNTFPolicy")

__all__ = ["DQNTorchPolicy"]
