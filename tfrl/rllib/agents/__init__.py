"""Classic `ray.rllib.agents`: the Trainer base and one package per algorithm."""
from tfrl.utils.lazy_exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "Trainer": "tfrl.trainer", "with_common_config": "tfrl.config",
    "COMMON_CONFIG": "tfrl.config"})
__all__ = ["Trainer", "with_common_config", "COMMON_CONFIG"]
