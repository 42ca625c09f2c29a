"""The model section of a config: MODEL_DEFAULTS, the one source of its defaults, and the merge
every model goes through (the catalog before it picks a model, TFModel when a model is built
directly). See docs/architecture.md, "Module map".
"""
from __future__ import annotations

import copy
from typing import Dict

from tfrl.errors import InvalidConfigError

MODEL_DEFAULTS: Dict = {
    "fcnet_hiddens": [256, 256],
    "fcnet_activation": "tanh",
    # orthogonal initialisation gains of the fully connected network's hidden layers and of its
    # value output (the policy output starts near zero: normal with std 0.01)
    "fcnet_init_gain": 2 ** 0.5,
    "value_out_init_gain": 1.0,
    "vf_share_layers": False,
    "conv_filters": None,
    "conv_activation": "relu",
    "post_fcnet_hiddens": [256],
    "use_lstm": False,
    "lstm_cell_size": 256,
    # the previous action and reward beside the features at the LSTM's input
    # (tfrl/models/prev_action_reward.py)
    "lstm_use_prev_action_reward": False,
    "max_seq_len": 20,
    "custom_model": None,
    "custom_model_config": {},
    # Ray 0.8's name of custom_model_config (models read model_config["custom_options"])
    "custom_options": {},
    "custom_action_dist": None,
    "dist_type": None,
}


def merge_model_config(model_config: Dict | None) -> Dict:
    """MODEL_DEFAULTS updated with `model_config`.

    Raises:
        InvalidConfigError: on unknown keys.
    """
    model_config = dict(model_config or {})
    unknown = sorted(set(model_config) - set(MODEL_DEFAULTS))
    if unknown:
        raise InvalidConfigError(
            f"Unknown model config key(s) {unknown}; known keys are {sorted(MODEL_DEFAULTS)}. "
            "Put model-specific settings under 'custom_model_config'.")
    merged = copy.deepcopy(MODEL_DEFAULTS)
    merged.update(model_config)
    return merged
