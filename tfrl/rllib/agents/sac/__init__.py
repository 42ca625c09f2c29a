"""Classic `ray.rllib.agents.sac`: SACTrainer, DEFAULT_CONFIG, SACTFPolicy."""
from tfrl.agents.sac import DEFAULT_CONFIG, SACTFPolicy, SACTrainer
from tfrl.rllib.agents.sac.sac_torch_policy import SACTorchPolicy

__all__ = ["DEFAULT_CONFIG", "SACTrainer", "SACTFPolicy", "SACTorchPolicy"]
