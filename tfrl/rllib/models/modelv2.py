"""Classic `ray.rllib.models.modelv2`: ModelV2 is tfrl's TFModel (tfrl has one framework), and
`restore_original_dimensions`."""
from tfrl.models.tf_model import TFModel

ModelV2 = TFModel


def restore_original_dimensions(obs, obs_space, tensorlib="tf"):
    """Classic RLlib unflattened the flat observation tensor of a Dict/Tuple space here. tfrl's
    models already get the observations in their original structure (input_dict["obs"]; the
    flat form is input_dict["obs_flat"]), so `obs` comes back as it is."""
    return obs


__all__ = ["ModelV2", "restore_original_dimensions"]
