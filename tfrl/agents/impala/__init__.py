"""IMPALA (V-trace, asynchronous sampling into a learner queue table) and APPO (its PPO
variant)."""
from tfrl.agents.impala.appo import APPOTrainer
from tfrl.agents.impala.appo_policy import AsyncPPOTFPolicy
from tfrl.agents.impala.config import APPO_DEFAULT_CONFIG, DEFAULT_CONFIG
from tfrl.agents.impala.impala import ImpalaTrainer
from tfrl.agents.impala.impala_policy import VTraceTFPolicy

__all__ = ["DEFAULT_CONFIG", "ImpalaTrainer", "VTraceTFPolicy", "APPO_DEFAULT_CONFIG",
           "APPOTrainer", "AsyncPPOTFPolicy"]
