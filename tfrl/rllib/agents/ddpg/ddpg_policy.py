"""Classic `ray.rllib.agents.ddpg.ddpg_policy`: the DDPG (and TD3) TF policy."""
from tfrl.agents.ddpg.ddpg_policy import DDPGTFPolicy

__all__ = ["DDPGTFPolicy"]
