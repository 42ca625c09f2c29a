"""Vanilla policy gradient (REINFORCE): returns-to-go weight the log-likelihood of actions."""
from tfrl.agents.pg.config import DEFAULT_CONFIG
from tfrl.agents.pg.pg import PGTrainer
from tfrl.agents.pg.pg_policy import PGTFPolicy

__all__ = ["DEFAULT_CONFIG", "PGTrainer", "PGTFPolicy"]
