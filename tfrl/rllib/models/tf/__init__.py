"""Classic `ray.rllib.models.tf`: the TensorFlow models."""
from tfrl.utils.lazy_exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "TFModelV2": "tfrl.models.tf_model:TFModel",
    "FullyConnectedNetwork": "tfrl.models.fcnet", "VisionNetwork": "tfrl.models.visionnet"})
__all__ = ["TFModelV2", "FullyConnectedNetwork", "VisionNetwork"]
