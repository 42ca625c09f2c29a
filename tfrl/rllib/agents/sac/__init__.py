"""Classic `ray.rllib.agents.sac`: SACTrainer, DEFAULT_CONFIG, SACTFPolicy."""
from tfrl.agents.sac import DEFAULT_CONFIG, SACTFPolicy, SACTrainer

__all__ = ["DEFAULT_CONFIG", "SACTrainer", "SACTFPolicy"]
