"""Classic `ray.rllib.agents.dqn`: DQNTrainer, ApexTrainer, DEFAULT_CONFIG, DQNTFPolicy (and the
torch policies' names, as classic RLlib has them without torch)."""
from tfrl.agents.dqn import APEX_DEFAULT_CONFIG, DEFAULT_CONFIG, ApexTrainer, DQNTFPolicy, DQNTrainer
from tfrl.rllib.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from tfrl.rllib.agents.dqn.simple_q_torch_policy import SimpleQTorchPolicy

__all__ = ["DEFAULT_CONFIG", "APEX_DEFAULT_CONFIG", "DQNTrainer", "ApexTrainer", "DQNTFPolicy",
           "DQNTorchPolicy", "SimpleQTorchPolicy"]
