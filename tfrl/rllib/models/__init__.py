"""Classic `ray.rllib.models`: the model catalog, ModelV2, distributions, preprocessors."""
from tfrl.utils.lazy_exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "ModelCatalog": "tfrl.models.catalog", "MODEL_DEFAULTS": "tfrl.models.catalog",
    "ModelV2": "tfrl.models.tf_model:TFModel",
    "ActionDistribution": "tfrl.models.distributions",
    "Preprocessor": "tfrl.models.preprocessors"})
__all__ = ["ModelCatalog", "MODEL_DEFAULTS", "ModelV2", "ActionDistribution", "Preprocessor"]
