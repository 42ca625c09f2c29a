"""Classic `ray.rllib.agents.ppo.appo`: APPOTrainer (IMPALA's data path with PPO's surrogate)."""
from tfrl.agents.impala import APPO_DEFAULT_CONFIG as DEFAULT_CONFIG
from tfrl.agents.impala import APPOTrainer

__all__ = ["DEFAULT_CONFIG", "APPOTrainer"]
