"""Deep Q-networks: target network, double Q, dueling heads, n-step returns, prioritized replay;
Ape-X (distributed prioritized replay over several replay shards)."""
from tfrl.agents.dqn.apex import APEX_DEFAULT_CONFIG, ApexTrainer
from tfrl.agents.dqn.config import DEFAULT_CONFIG
from tfrl.agents.dqn.dqn import DQNTrainer
from tfrl.agents.dqn.dqn_model import QNetwork
from tfrl.agents.dqn.dqn_policy import DQNTFPolicy

__all__ = ["APEX_DEFAULT_CONFIG", "ApexTrainer", "DEFAULT_CONFIG", "DQNTrainer", "DQNTFPolicy", "QNetwork"]
