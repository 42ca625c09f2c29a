"""Classic `ray.rllib.agents.marwil.marwil_tf_policy` (Ray 1.x): the MARWIL TF policy."""
from tfrl.agents.marwil.marwil_policy import MARWILTFPolicy

__all__ = ["MARWILTFPolicy"]
