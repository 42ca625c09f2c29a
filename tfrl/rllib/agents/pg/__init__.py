"""Classic `ray.rllib.agents.pg`: PGTrainer, DEFAULT_CONFIG, PGTFPolicy."""
from tfrl.agents.pg import DEFAULT_CONFIG, PGTFPolicy, PGTrainer

__all__ = ["DEFAULT_CONFIG", "PGTrainer", "PGTFPolicy"]
