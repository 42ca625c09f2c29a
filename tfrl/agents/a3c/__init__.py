"""Advantage actor-critic: A3C (asynchronous gradients) and A2C (synchronous batches)."""
from tfrl.agents.a3c.a2c import A2CTrainer
from tfrl.agents.a3c.a3c import A3CTrainer
from tfrl.agents.a3c.config import A2C_DEFAULT_CONFIG, DEFAULT_CONFIG
from tfrl.agents.a3c.a3c_policy import A3CTFPolicy

__all__ = ["DEFAULT_CONFIG", "A3CTrainer", "A2C_DEFAULT_CONFIG", "A2CTrainer", "A3CTFPolicy"]
