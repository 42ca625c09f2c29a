"""Classic `ray.rllib.agents.ppo`: PPOTrainer, APPOTrainer, DEFAULT_CONFIG, PPOTFPolicy."""
from tfrl.agents.impala import APPOTrainer
from tfrl.agents.ppo import DEFAULT_CONFIG, PPOTFPolicy, PPOTrainer

__all__ = ["DEFAULT_CONFIG", "PPOTrainer", "PPOTFPolicy", "APPOTrainer"]
