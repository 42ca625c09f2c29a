"""Models, action distributions and observation preprocessors for tfrl policies."""
from tfrl.models.catalog import MODEL_DEFAULTS, ModelCatalog, merge_model_config
from tfrl.models.distributions import (ActionDistribution, Categorical, Deterministic,
                                       DiagGaussian, MultiCategorical, SquashedGaussian)
from tfrl.models.fcnet import FullyConnectedNetwork
from tfrl.models.preprocessors import Preprocessor, get_preprocessor
from tfrl.models.recurrent import LSTMWrapper
from tfrl.models.tf_model import TFModel
from tfrl.models.visionnet import VisionNetwork

__all__ = [
    "ModelCatalog", "MODEL_DEFAULTS", "merge_model_config", "TFModel",
    "FullyConnectedNetwork", "VisionNetwork", "LSTMWrapper", "Preprocessor",
    "get_preprocessor", "ActionDistribution", "Categorical", "MultiCategorical",
    "DiagGaussian", "SquashedGaussian", "Deterministic",
]
