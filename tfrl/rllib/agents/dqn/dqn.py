"""Classic `ray.rllib.agents.dqn.dqn`: the DQN trainer module."""
from tfrl.agents.dqn.dqn import (DEFAULT_CONFIG, DQNTrainer, make_policy_optimizer,
                                 validate_config)

__all__ = ["DEFAULT_CONFIG", "DQNTrainer", "make_policy_optimizer", "validate_config"]
