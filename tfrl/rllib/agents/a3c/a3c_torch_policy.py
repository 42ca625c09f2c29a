"""Classic `ray.rllib.agents.a3c.a3c_torch_policy` as classic RLlib has it without torch installed:
`A3CTorchPolicy` imports and derives; constructing it raises an ImportError naming A3CTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

A3CTorchPolicy = torch_policy_stand_in("A3CTorchPolicy", "A3CTFPolicy")

__all__ = ["A3CTorchPolicy"]
