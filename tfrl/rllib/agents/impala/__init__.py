"""Classic `ray.rllib.agents.impala`: ImpalaTrainer, DEFAULT_CONFIG, VTraceTFPolicy."""
from tfrl.agents.impala import DEFAULT_CONFIG, ImpalaTrainer, VTraceTFPolicy

__all__ = ["DEFAULT_CONFIG", "ImpalaTrainer", "VTraceTFPolicy"]
