"""Classic `ray.rllib.agents.a3c`: A3CTrainer, A2CTrainer and their configs."""
from tfrl.agents.a3c import A2C_DEFAULT_CONFIG, DEFAULT_CONFIG, A2CTrainer, A3CTFPolicy, A3CTrainer

__all__ = ["DEFAULT_CONFIG", "A2C_DEFAULT_CONFIG", "A3CTrainer", "A2CTrainer", "A3CTFPolicy"]
