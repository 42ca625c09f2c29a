"""Classic `ray.rllib.agents.trainer_template`: tfrl's build_trainer."""
from tfrl.trainer_template import build_trainer

__all__ = ["build_trainer"]
