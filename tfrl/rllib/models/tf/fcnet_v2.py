"""Classic `ray.rllib.models.tf.fcnet_v2` (Ray 0.8)."""
from tfrl.models.fcnet import FullyConnectedNetwork

__all__ = ["FullyConnectedNetwork"]
