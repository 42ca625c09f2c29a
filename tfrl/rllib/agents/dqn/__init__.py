"""Classic `ray.rllib.agents.dqn`: DQNTrainer, ApexTrainer, DEFAULT_CONFIG, DQNTFPolicy."""
from tfrl.agents.dqn import APEX_DEFAULT_CONFIG, DEFAULT_CONFIG, ApexTrainer, DQNTFPolicy, DQNTrainer

__all__ = ["DEFAULT_CONFIG", "APEX_DEFAULT_CONFIG", "DQNTrainer", "ApexTrainer", "DQNTFPolicy"]
