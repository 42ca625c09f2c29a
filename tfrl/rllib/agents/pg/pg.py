"""Classic `ray.rllib.agents.pg.pg`: the PG trainer module."""
from tfrl.agents.pg import DEFAULT_CONFIG, PGTrainer

__all__ = ["DEFAULT_CONFIG", "PGTrainer"]
