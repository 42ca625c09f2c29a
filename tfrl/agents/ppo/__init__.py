"""Proximal policy optimisation: clipped surrogate, adaptive KL penalty, GAE, value clipping."""
from tfrl.agents.ppo.config import DEFAULT_CONFIG
from tfrl.agents.ppo.ppo import PPOTrainer
from tfrl.agents.ppo.ppo_policy import PPOTFPolicy

__all__ = ["DEFAULT_CONFIG", "PPOTrainer", "PPOTFPolicy"]
