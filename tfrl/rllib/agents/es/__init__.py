"""Classic `ray.rllib.agents.es`: ESTrainer, DEFAULT_CONFIG."""
from tfrl.agents.es.config import DEFAULT_CONFIG
from tfrl.agents.es.es import ESTrainer

__all__ = ["DEFAULT_CONFIG", "ESTrainer"]
