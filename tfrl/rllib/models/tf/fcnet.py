"""Classic `ray.rllib.models.tf.fcnet` (fcnet_v2 in 0.8)."""
from tfrl.models.fcnet import FullyConnectedNetwork

__all__ = ["FullyConnectedNetwork"]
