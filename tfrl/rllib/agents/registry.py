"""Classic `ray.rllib.agents.registry`: algorithm names -> trainer classes."""
from tfrl.registry import ALGORITHMS, get_trainer_class

get_agent_class = get_trainer_class  # the 0.8 name

__all__ = ["ALGORITHMS", "get_trainer_class", "get_agent_class"]
