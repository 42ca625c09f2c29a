"""Classic `ray.rllib.models.tf.visionnet`."""
from tfrl.models.visionnet import VisionNetwork

__all__ = ["VisionNetwork"]
