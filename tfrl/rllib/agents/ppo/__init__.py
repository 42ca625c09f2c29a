"""Classic `ray.rllib.agents.ppo`: PPOTrainer, APPOTrainer, DEFAULT_CONFIG, PPOTFPolicy."""
from tfrl.agents.impala import APPOTrainer
from tfrl.agents.ppo import DEFAULT_CONFIG, PPOTFPolicy, PPOTrainer
from tfrl.rllib.agents.ppo.ppo_torch_policy import PPOTorchPolicy

__all__ = ["DEFAULT_CONFIG", "PPOTrainer", "PPOTFPolicy", "APPOTrainer", "PPOTorchPolicy"]
