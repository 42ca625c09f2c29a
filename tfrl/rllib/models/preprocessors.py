"""Classic `ray.rllib.models.preprocessors`."""
from tfrl.models.preprocessors import (FlatteningPreprocessor, NoPreprocessor,
                                       OneHotPreprocessor, Preprocessor, get_preprocessor)

__all__ = ["Preprocessor", "get_preprocessor", "NoPreprocessor", "OneHotPreprocessor",
           "FlatteningPreprocessor"]
