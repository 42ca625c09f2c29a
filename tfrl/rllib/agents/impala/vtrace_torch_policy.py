"""Classic `ray.rllib.agents.impala.vtrace_torch_policy` as classic RLlib has it without torch installed:
`VTraceTorchPolicy` imports and derives; constructing it raises an ImportError naming VTraceTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

VTraceTorchPolicy = torch_policy_stand_in("VTraceTorchPolicy", "VTraceTFPolicy")

__all__ = ["VTraceTorchPolicy"]
