"""Classic `ray.rllib.agents.ddpg`: DDPGTrainer, TD3Trainer, DEFAULT_CONFIG."""
from tfrl.agents.ddpg import DEFAULT_CONFIG, DDPGTFPolicy, DDPGTrainer, TD3Trainer

__all__ = ["DEFAULT_CONFIG", "DDPGTrainer", "TD3Trainer", "DDPGTFPolicy"]
