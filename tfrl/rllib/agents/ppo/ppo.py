"""Classic `ray.rllib.agents.ppo.ppo`: the PPO trainer module."""
from tfrl.agents.ppo.ppo import (DEFAULT_CONFIG, PPOTrainer, make_policy_optimizer, update_kl,
                                 validate_config)

__all__ = ["DEFAULT_CONFIG", "PPOTrainer", "make_policy_optimizer", "update_kl", "validate_config"]
