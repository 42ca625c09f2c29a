"""Soft actor-critic: twin Q, squashed Gaussian actor, automatic entropy tuning."""
from tfrl.agents.sac.config import DEFAULT_CONFIG
from tfrl.agents.sac.sac import SACTrainer
from tfrl.agents.sac.sac_policy import SACTFPolicy

__all__ = ["DEFAULT_CONFIG", "SACTrainer", "SACTFPolicy"]
