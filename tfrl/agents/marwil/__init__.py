"""MARWIL (advantage-weighted imitation) and BC (its beta = 0), learning from recorded data."""
from tfrl.agents.marwil.config import DEFAULT_CONFIG
from tfrl.agents.marwil.marwil import BC_DEFAULT_CONFIG, BCTrainer, MARWILTrainer
from tfrl.agents.marwil.marwil_policy import MARWILTFPolicy

__all__ = ["DEFAULT_CONFIG", "BC_DEFAULT_CONFIG", "MARWILTrainer", "BCTrainer",
           "MARWILTFPolicy"]
