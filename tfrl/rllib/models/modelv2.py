"""Classic `ray.rllib.models.modelv2`: ModelV2 is tfrl's TFModel (tfrl has one framework)."""
from tfrl.models.tf_model import TFModel

ModelV2 = TFModel

__all__ = ["ModelV2"]
