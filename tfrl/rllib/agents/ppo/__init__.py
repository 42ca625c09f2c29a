"""Classic `ray.rllib.agents.ppo`: PPOTrainer, DEFAULT_CONFIG, PPOTFPolicy."""
from tfrl.agents.ppo import DEFAULT_CONFIG, PPOTFPolicy, PPOTrainer

__all__ = ["DEFAULT_CONFIG", "PPOTrainer", "PPOTFPolicy"]
