"""Classic `ray.rllib.agents.trainer`: tfrl's Trainer and its common config."""
from tfrl.trainer import COMMON_CONFIG, Trainer, with_common_config

__all__ = ["Trainer", "COMMON_CONFIG", "with_common_config"]
