"""Classic `ray.rllib.utils`: annotations, framework import, schedules, TF helpers."""
from tfrl.rllib.utils.annotations import DeveloperAPI, PublicAPI, override
from tfrl.rllib.utils.framework import try_import_tf, try_import_torch

__all__ = ["override", "PublicAPI", "DeveloperAPI", "try_import_tf", "try_import_torch"]
