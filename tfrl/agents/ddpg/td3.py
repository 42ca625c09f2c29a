"""TD3 trainer: DDPGTrainer with TD3_CONFIG (twin critics, target policy smoothing, delayed
policy updates; Fujimoto et al. 2018). See ddpg.py and config.py."""
from __future__ import annotations

from tfrl.agents.ddpg.config import TD3_CONFIG
from tfrl.agents.ddpg.ddpg import DDPGTrainer, validate_config

TD3Trainer = DDPGTrainer.with_updates(name="TD3", default_config=TD3_CONFIG)

__all__ = ["TD3Trainer", "TD3_CONFIG", "validate_config"]
