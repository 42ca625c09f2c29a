"""Deterministic actor-critic: DDPG, and TD3 (twin Q, target policy smoothing, delayed policy
updates) as a config of it."""
from tfrl.agents.ddpg.config import DEFAULT_CONFIG, TD3_CONFIG
from tfrl.agents.ddpg.ddpg import DDPGTrainer
from tfrl.agents.ddpg.ddpg_policy import DDPGTFPolicy
from tfrl.agents.ddpg.td3 import TD3Trainer

__all__ = ["DEFAULT_CONFIG", "TD3_CONFIG", "DDPGTrainer", "TD3Trainer", "DDPGTFPolicy"]
