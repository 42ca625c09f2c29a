"""Classic `ray.rllib.agents.dqn.simple_q_torch_policy` as classic RLlib has it without torch installed:
`SimpleQTorchPolicy` imports and derives; constructing it raises an ImportError naming SimpleQTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

SimpleQTorchPolicy = torch_policy_stand_in("SimpleQTorchPolicy", "SimpleQTFPolicy")

__all__ = ["SimpleQTorchPolicy"]
