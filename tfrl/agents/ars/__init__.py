"""Augmented random search (Mania et al., 2018), built from ES's parts."""
from tfrl.agents.ars.ars import ARSTrainer
from tfrl.agents.ars.config import DEFAULT_CONFIG

__all__ = ["DEFAULT_CONFIG", "ARSTrainer"]
