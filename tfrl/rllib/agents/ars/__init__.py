"""Classic `ray.rllib.agents.ars`: ARSTrainer, DEFAULT_CONFIG."""
from tfrl.agents.ars.ars import ARSTrainer
from tfrl.agents.ars.config import DEFAULT_CONFIG

__all__ = ["DEFAULT_CONFIG", "ARSTrainer"]
