"""Trainer configuration: merging common defaults, an algorithm's defaults and the user's dict.

Every trainer's config is `COMMON_CONFIG` updated by its algorithm's defaults, updated by the
user's dict (RLlib's classic scheme). A key the merged defaults do not know is an error that
names the closest valid key, so a typo never silently falls back to a default. Nested dicts
listed in `OPEN_DICT_KEYS` (model options, env options, ...) accept any keys.
"""
from __future__ import annotations

import copy
import difflib
from typing import Any, Mapping

from tfrl import errors

# Sub-dicts whose keys are free-form (user models and envs define their own options).
OPEN_DICT_KEYS = frozenset({"env_config", "custom_model_config", "custom_metrics", "optimizer",
                            "evaluation_config", "multiagent", "policies", "replay_table", "extra"})


def _closest(key: str, valid) -> str:
    matches = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)
    return f"; did you mean {matches[0]!r}?" if matches else ""


def merge_config(defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None,
                 path: str = "", allow_new_keys: bool = False) -> dict:
    """Returns a deep copy of `defaults` updated with `overrides`.

    Nested dicts are merged key by key. Keys under `OPEN_DICT_KEYS` (and anywhere when
    `allow_new_keys`) may be new.

    Raises:
      InvalidConfigError: a key of `overrides` is not in `defaults`; the message names the
        closest valid key.
    """
    merged = copy.deepcopy(dict(defaults))
    for key, value in (overrides or {}).items():
        where = f"{path}{key}"
        if key not in merged:
            if not allow_new_keys:
                raise errors.InvalidConfigError(
                    f"unknown config key {where!r}{_closest(key, merged)} (valid keys here: "
                    f"{', '.join(sorted(merged))})")
            merged[key] = copy.deepcopy(value)
            continue
        if isinstance(merged[key], dict) and isinstance(value, Mapping):
            merged[key] = merge_config(merged[key], value, path=f"{where}.",
                                       allow_new_keys=allow_new_keys or key in OPEN_DICT_KEYS)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def policy_defaults(algorithm_defaults: Mapping[str, Any]) -> dict:
    """An algorithm's DEFAULT_CONFIG as its policy's defaults (a policy's `get_default_config`):
    a deep copy without the `model` section, whose defaults the ModelCatalog supplies."""
    config = copy.deepcopy(dict(algorithm_defaults))
    config.pop("model", None)
    return config
