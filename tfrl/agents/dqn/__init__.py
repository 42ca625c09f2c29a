"""Deep Q-networks: target network, double Q, dueling heads, n-step returns, prioritized replay."""
from tfrl.agents.dqn.dqn import DEFAULT_CONFIG, DQNTrainer
from tfrl.agents.dqn.dqn_model import QNetwork
from tfrl.agents.dqn.dqn_policy import DQNTFPolicy

__all__ = ["DEFAULT_CONFIG", "DQNTrainer", "DQNTFPolicy", "QNetwork"]
