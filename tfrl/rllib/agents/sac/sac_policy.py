"""Classic `ray.rllib.agents.sac.sac_policy`: the SAC TF policy."""
from tfrl.agents.sac.sac_policy import SACTFPolicy

__all__ = ["SACTFPolicy"]
