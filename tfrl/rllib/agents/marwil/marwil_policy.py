"""Classic `ray.rllib.agents.marwil.marwil_policy` (Ray 0.8): the MARWIL TF policy, under its 0.8 name."""
from tfrl.agents.marwil.marwil_policy import MARWILTFPolicy

MARWILPolicy = MARWILTFPolicy

__all__ = ["MARWILPolicy", "MARWILTFPolicy"]
