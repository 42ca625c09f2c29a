"""Models, action distributions and observation preprocessors for tfrl policies.

The names below are imported on first use (PEP 562): `model_config` (the model config keys and
their defaults) is needed by processes that never start TensorFlow.
"""
from tfrl.utils.lazy_exports import lazy_package

_NAMES_BY_MODULE = {
    "catalog": ("MODEL_DEFAULTS", "ModelCatalog", "merge_model_config"),
    "distributions": ("ActionDistribution", "Categorical", "Deterministic", "DiagGaussian",
                      "MultiCategorical", "SquashedGaussian"),
    "multi_action_dist": ("MultiActionDistribution",),
    "fcnet": ("FullyConnectedNetwork",),
    "preprocessors": ("Preprocessor", "get_preprocessor"),
    "recurrent": ("LSTMWrapper",),
    "tf_model": ("TFModel",),
    "visionnet": ("VisionNetwork",),
}
__all__, __getattr__ = lazy_package(__name__, _NAMES_BY_MODULE)
