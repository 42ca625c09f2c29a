"""Classic `ray.rllib.agents.ddpg.ddpg_torch_policy` as classic RLlib has it without torch installed:
`DDPGTorchPolicy` imports and derives; constructing it raises an ImportError naming DDPGTFPolicy
(`tfrl.policy.torch_stand_in`)."""
from tfrl.policy.torch_stand_in import torch_policy_stand_in

DDPGTorchPolicy = torch_policy_stand_in("DDPGTorchPolicy", "DDPGTFPolicy")

__all__ = ["DDPGTorchPolicy"]
