"""Classic `ray.rllib.models.catalog`."""
from tfrl.models.catalog import MODEL_DEFAULTS, ModelCatalog

__all__ = ["ModelCatalog", "MODEL_DEFAULTS"]
