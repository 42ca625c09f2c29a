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
                            "evaluation_config", "multiagent", "policies", "replay_table", "extra",
                            "custom_resources_per_worker", "learner_resources", "replay_resources"})


# Classic RLlib trainer keys that change nothing in tfrl, accepted at the top level of a config
# (and left out of it) so classic configs run: key -> why it changes nothing.
CLASSIC_KEYS_WITHOUT_EFFECT = {
    "compress_observations": "replay and offline output compress by their own settings",
    "log_sys_usage": "tfrl does not report system usage",
    "collect_metrics_timeout": "workers report their episodes with their samples",
    "memory": "Ray's memory reservations are not used",
    "object_store_memory": "Ray's memory reservations are not used",
    "memory_per_worker": "Ray's memory reservations are not used",
    "object_store_memory_per_worker": "Ray's memory reservations are not used",
    "tf_session_args": "TensorFlow 2 has no sessions",
    "local_tf_session_args": "TensorFlow 2 has no sessions",
    "_use_trajectory_view_api": "tfrl's loss reads the columns it needs",
    "num_data_loader_buffers": "IMPALA's learner reads its batches from the replay service",
    "num_aggregation_workers": "IMPALA's learner reads its batches from the replay service, "
                               "with no aggregation actors",
    "fake_sampler": "workers always step their envs (classic RLlib's fake sampler repeated the "
                    "first batch, for speed tests)",
}


def _closest(key: str, valid) -> str:
    matches = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)
    return f"; did you mean {matches[0]!r}?" if matches else ""


def merge_config(defaults: Mapping[str, Any], overrides: Mapping[str, Any] | None,
                 path: str = "", allow_new_keys: bool = False) -> dict:
    """Returns a deep copy of `defaults` updated with `overrides`.

    Nested dicts are merged key by key. Keys under `OPEN_DICT_KEYS` (and anywhere when
    `allow_new_keys`) may be new; top-level classic keys of `CLASSIC_KEYS_WITHOUT_EFFECT` are
    accepted and left out.

    Raises:
      InvalidConfigError: a key of `overrides` is not in `defaults`; the message names the
        closest valid key.
    """
    merged = copy.deepcopy(dict(defaults))
    for key, value in (overrides or {}).items():
        where = f"{path}{key}"
        if key not in merged:
            if not path and not allow_new_keys and key in CLASSIC_KEYS_WITHOUT_EFFECT:
                continue  # accepted for classic configs; see CLASSIC_KEYS_WITHOUT_EFFECT
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


# classic RLlib framework names that mean TensorFlow: tfrl runs TensorFlow 2 (eager execution,
# learn and act steps traced with tf.function) whichever of them is given
TF_FRAMEWORKS = ("tf", "tf2", "tfe")


def apply_classic_keys(config: dict, owner: str) -> None:
    """Checks, in a merged trainer config, the classic RLlib keys that only choose what tfrl
    always does, and moves the top-level `vf_share_layers` (PPO's place for it before Ray 1.x)
    into `model` unless the model config sets it itself.

    `framework` "tf", "tf2" or "tfe" and `eager` / `eager_tracing` True or False are accepted
    and change nothing: tfrl runs TensorFlow 2 eagerly with its hot paths traced.

    Raises:
      InvalidConfigError: another framework (e.g. "torch"), `use_pytorch: True`, or a
        non-boolean eager / eager_tracing.
    """
    framework = config.get("framework")
    if framework is not None and framework not in TF_FRAMEWORKS:
        raise errors.InvalidConfigError(
            f"{owner}: framework {framework!r} is not available; tfrl runs TensorFlow 2 only "
            f"(framework {' / '.join(map(repr, TF_FRAMEWORKS))}, or leave the key out). Port "
            "the policy to build_tf_policy to run it here")
    if config.get("use_pytorch"):
        raise errors.InvalidConfigError(
            f"{owner}: use_pytorch True is not available; tfrl runs TensorFlow 2 only (set "
            "use_pytorch False or leave the key out)")
    for key in ("eager", "eager_tracing"):
        if not isinstance(config.get(key, False), bool):
            raise errors.InvalidConfigError(
                f"{owner}: {key} must be True or False, got {config[key]!r}")
    share = config.get("vf_share_layers")
    if share is not None:
        model = config.setdefault("model", {})
        if "vf_share_layers" not in model or share != model["vf_share_layers"]:
            model["vf_share_layers"] = bool(share)


def policy_defaults(algorithm_defaults: Mapping[str, Any]) -> dict:
    """An algorithm's DEFAULT_CONFIG as its policy's defaults (a policy's `get_default_config`):
    a deep copy without the `model` section, whose defaults the ModelCatalog supplies."""
    config = copy.deepcopy(dict(algorithm_defaults))
    config.pop("model", None)
    return config
