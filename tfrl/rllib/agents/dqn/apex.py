"""Classic `ray.rllib.agents.dqn.apex`: ApexTrainer and APEX_DEFAULT_CONFIG."""
from tfrl.agents.dqn.apex import APEX_DEFAULT_CONFIG, ApexTrainer

__all__ = ["APEX_DEFAULT_CONFIG", "ApexTrainer"]
