"""QNetwork: the Q-value model of DQN, with an optional dueling head.

This is a model (a TFModel, like tfrl/models/fcnet.py) that DQNTFPolicy
builds twice (online and target network). A trunk feeds either one linear layer of Q-values, or
with `dueling` two streams
(each with `hiddens` dense ReLU layers): a state value V(s) and advantages A(s, a), combined as

    Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')

(the mean keeps V and A identifiable). The outputs are the Q-values [B, num_actions].

The trunk is dense (`fcnet_hiddens`, `fcnet_activation` of the model config) for vector
observations, and for images (rank-3 Box, e.g. 84x84x3 frames) the convolution stack of the
vision network (`conv_filters`, `conv_activation`; tfrl/models/visionnet.py), flattened; uint8
frames are scaled to [0, 1] first.

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.models.tf_model import TFModel
from tfrl.models.visionnet import DEFAULT_CONV_FILTERS


def dueling_q_values(state_value, advantages):
    """Q = V + A - mean(A) for V [B, 1] and A [B, num_actions]."""
    return state_value + advantages - tf.reduce_mean(advantages, axis=1, keepdims=True)


def _dense_stack(x, sizes, activation, prefix):
    for i, size in enumerate(sizes):
        x = keras.layers.Dense(size, activation=activation, name=f"{prefix}_{i}",
                               kernel_initializer=keras.initializers.Orthogonal(1.0))(x)
    return x


def _conv_stack(x, model_config):
    """The vision network's convolutions ("same" padding), flattened."""
    filters = model_config["conv_filters"] or DEFAULT_CONV_FILTERS
    activation = model_config["conv_activation"]
    for i, (channels, kernel, stride) in enumerate(filters):
        x = keras.layers.Conv2D(channels, kernel, strides=stride, padding="same",
                                activation=activation, name=f"conv_{i}")(x)
    return keras.layers.Flatten(name="conv_flatten")(x)


class QNetwork(TFModel):
    """Q-values for every discrete action (module docstring). No value branch."""

    has_value_branch = False

    def __init__(self, obs_space, action_space, num_outputs, model_config, name="q_network",
                 *, dueling: bool = True, hiddens: Sequence[int] = (256,)):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.dueling = bool(dueling)
        inputs = keras.Input(shape=self.preprocessor.shape, name="observations")
        is_image = len(self.preprocessor.shape) == 3
        self._scale = (1.0 / 255.0 if is_image and np.dtype(getattr(obs_space, "dtype", np.float32))
                       == np.uint8 else 1.0)
        if is_image:
            trunk = _conv_stack(inputs, self.model_config)
        else:
            trunk = _dense_stack(inputs, list(self.model_config["fcnet_hiddens"]),
                                 self.model_config["fcnet_activation"], "fc")
        if self.dueling:
            advantage_stream = _dense_stack(trunk, list(hiddens), "relu", "advantage_hidden")
            advantages = keras.layers.Dense(num_outputs, name="advantage_out")(advantage_stream)
            value_stream = _dense_stack(trunk, list(hiddens), "relu", "value_hidden")
            state_value = keras.layers.Dense(1, name="value_out")(value_stream)
            self.base_model = keras.Model(inputs, [advantages, state_value], name=name)
        else:
            q_stream = _dense_stack(trunk, list(hiddens), "relu", "q_hidden")
            q_values = keras.layers.Dense(num_outputs, name="q_out")(q_stream)
            self.base_model = keras.Model(inputs, q_values, name=name)

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs_flat"]
        if self._scale != 1.0:
            obs = obs * self._scale
        if self.dueling:
            advantages, state_value = self.base_model(obs)
            return dueling_q_values(state_value, advantages), state
        return self.base_model(obs), state
