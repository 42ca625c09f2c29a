"""Classic `ray.rllib.agents.trainer`: tfrl's Trainer and its common config."""
from tfrl.config import COMMON_CONFIG, with_common_config
from tfrl.trainer import Trainer

__all__ = ["Trainer", "COMMON_CONFIG", "with_common_config"]
