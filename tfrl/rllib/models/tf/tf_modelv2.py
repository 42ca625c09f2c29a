"""Classic `ray.rllib.models.tf.tf_modelv2`: TFModelV2 is tfrl's TFModel."""
from tfrl.models.tf_model import TFModel

TFModelV2 = TFModel

__all__ = ["TFModelV2"]
