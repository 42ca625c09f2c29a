"""Configuration, the bottom layer of tfrl with errors, runtime and utils: it imports nothing of
tfrl above it, and every other layer reads its defaults from here.

- defaults.py: `COMMON_CONFIG` and `with_common_config`, the one source of trainer defaults
- model.py: `MODEL_DEFAULTS`, the one source of the model section's defaults
- merge.py: `merge_config` (unknown keys are errors), classic RLlib keys, `policy_defaults`
- settings.py: the typed settings dataclasses' base (`Settings`, `setting`)
"""
from tfrl.config.defaults import COMMON_CONFIG, with_common_config
from tfrl.config.merge import (OPEN_DICT_KEYS, TF_FRAMEWORKS, apply_classic_keys, merge_config,
                               policy_defaults)
from tfrl.config.model import MODEL_DEFAULTS, merge_model_config
from tfrl.config.settings import Settings, setting

__all__ = ["COMMON_CONFIG", "MODEL_DEFAULTS", "OPEN_DICT_KEYS", "TF_FRAMEWORKS", "Settings",
           "apply_classic_keys", "merge_config", "merge_model_config", "policy_defaults", "setting",
           "with_common_config"]
