"""Classic `ray.rllib.agents.a3c.a2c`."""
from tfrl.agents.a3c import A2C_DEFAULT_CONFIG, A2CTrainer

__all__ = ["A2C_DEFAULT_CONFIG", "A2CTrainer"]
