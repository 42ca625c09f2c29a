"""Classic `ray.rllib.agents.dqn`: DQNTrainer, DEFAULT_CONFIG, DQNTFPolicy."""
from tfrl.agents.dqn import DEFAULT_CONFIG, DQNTFPolicy, DQNTrainer

__all__ = ["DEFAULT_CONFIG", "DQNTrainer", "DQNTFPolicy"]
