"""QNetwork: the Q-value model of DQN, with an optional dueling head.

On the design map this is a model (a TFModel, like tfrl/models/fcnet.py) that DQNTFPolicy
builds twice (online and target network). A dense trunk (`fcnet_hiddens`, `fcnet_activation`
of the model config) feeds either one linear layer of Q-values, or with `dueling` two streams
(each with `hiddens` dense ReLU layers): a state value V(s) and advantages A(s, a), combined as

    Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')

(the mean keeps V and A identifiable). The outputs are the Q-values [B, num_actions].
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf
import tf_keras as keras

from tfrl.models.tf_model import TFModel


def dueling_q_values(state_value, advantages):
    """Q = V + A - mean(A) for V [B, 1] and A [B, num_actions]."""
    return state_value + advantages - tf.reduce_mean(advantages, axis=1, keepdims=True)


def _dense_stack(x, sizes, activation, prefix):
    for i, size in enumerate(sizes):
        x = keras.layers.Dense(size, activation=activation, name=f"{prefix}_{i}",
                               kernel_initializer=keras.initializers.Orthogonal(1.0))(x)
    return x


class QNetwork(TFModel):
    """Q-values for every discrete action (module docstring). No value branch."""

    has_value_branch = False

    def __init__(self, obs_space, action_space, num_outputs, model_config, name="q_network",
                 *, dueling: bool = True, hiddens: Sequence[int] = (256,)):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.dueling = bool(dueling)
        inputs = keras.Input(shape=self.preprocessor.shape, name="observations")
        trunk = _dense_stack(inputs, list(model_config.get("fcnet_hiddens", [256, 256])),
                             model_config.get("fcnet_activation", "tanh"), "fc")
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
        if self.dueling:
            advantages, state_value = self.base_model(input_dict["obs_flat"])
            return dueling_q_values(state_value, advantages), state
        return self.base_model(input_dict["obs_flat"]), state
