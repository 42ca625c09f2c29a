"""Classic `ray.rllib.agents.a3c.a3c`."""
from tfrl.agents.a3c import DEFAULT_CONFIG, A3CTrainer

__all__ = ["DEFAULT_CONFIG", "A3CTrainer"]
