"""Algorithms, one folder each (pg, a3c, ppo, dqn): a policy declared with build_tf_policy and a
trainer declared with build_trainer. `tfrl.registry.get_trainer_class(name)` maps names to trainers."""
from tfrl.registry import ALGORITHMS, get_trainer_class

__all__ = ["ALGORITHMS", "get_trainer_class"]
