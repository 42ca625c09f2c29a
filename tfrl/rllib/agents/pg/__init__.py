"""Classic `ray.rllib.agents.pg`: PGTrainer, DEFAULT_CONFIG, PGTFPolicy."""
from tfrl.agents.pg import DEFAULT_CONFIG, PGTFPolicy, PGTrainer
from tfrl.rllib.agents.pg.pg_torch_policy import PGTorchPolicy

__all__ = ["DEFAULT_CONFIG", "PGTrainer", "PGTFPolicy", "PGTorchPolicy"]
