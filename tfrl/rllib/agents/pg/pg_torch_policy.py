"""Classic `ray.rllib.agents.pg.pg_torch_policy` as classic RLlib has it without torch installed:
`PGTorchPolicy` imports and derives; constructing it raises an ImportError naming PGTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

PGTorchPolicy = torch_policy_stand_in("PGTorchPolicy", "PGTFPolicy")

__all__ = ["PGTorchPolicy"]
