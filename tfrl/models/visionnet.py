"""VisionNetwork: the default model for image observations (rank-3 Box, e.g. 84x84x4 frames).

Model config keys: `conv_filters` ([[channels, [kh, kw], stride], ...]; default for Atari-sized
frames below), `conv_activation`, `post_fcnet_hiddens` (dense layers after flattening). All
convolutions use "same" padding, so any image size works. Policy and value heads share the
convolutional trunk. uint8 frames are scaled to [0, 1].
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.models.tf_model import TFModel

DEFAULT_CONV_FILTERS = [[16, [8, 8], 4], [32, [4, 4], 2], [64, [3, 3], 1]]


class VisionNetwork(TFModel):
    """Conv trunk + dense layers, with policy and value heads; see the module docstring."""

    has_value_branch = True

    def __init__(self, obs_space, action_space, num_outputs, model_config, name="visionnet"):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        filters = self.model_config["conv_filters"] or DEFAULT_CONV_FILTERS
        activation = self.model_config["conv_activation"]
        post = list(self.model_config["post_fcnet_hiddens"])
        self._scale = 1.0 / 255.0 if np.dtype(obs_space.dtype) == np.uint8 else 1.0
        inputs = keras.Input(shape=self.preprocessor.shape, name="observations")
        x = inputs
        for i, (channels, kernel, stride) in enumerate(filters):
            x = keras.layers.Conv2D(channels, kernel, strides=stride, padding="same",
                                    activation=activation, name=f"conv_{i}")(x)
        x = keras.layers.Flatten()(x)
        for i, size in enumerate(post):
            x = keras.layers.Dense(size, activation=activation, name=f"post_fc_{i}")(x)
        if num_outputs:
            outputs = keras.layers.Dense(
                num_outputs, name="conv_out",
                kernel_initializer=keras.initializers.RandomNormal(stddev=0.01))(x)
        else:
            outputs = x
            self.num_outputs = int(x.shape[-1])
        value = keras.layers.Dense(1, name="value_out")(x)
        self.base_model = keras.Model(inputs, [outputs, value], name=name)
        self._value_out = None

    def forward(self, input_dict, state, seq_lens):
        outputs, value = self.base_model(input_dict["obs_flat"] * self._scale)
        self._value_out = tf.reshape(value, [-1])
        return outputs, state

    def value_function(self):
        return self._value_out
