"""Classic `ray.rllib.utils.tf_ops` (Ray 0.8.1 to 1.x)."""
from tfrl.agents.dqn.dqn_policy import huber_loss
from tfrl.utils.tf_ops import explained_variance

__all__ = ["explained_variance", "huber_loss"]
