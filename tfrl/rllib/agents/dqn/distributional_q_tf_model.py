"""Classic `ray.rllib.agents.dqn.distributional_q_tf_model`: DistributionalQTFModel, the base of
custom Q models (its forward returns features; DQN adds the dueling, distributional and noisy
heads its config asks for)."""
from tfrl.agents.dqn.distributional_q_model import DistributionalQTFModel

__all__ = ["DistributionalQTFModel"]
