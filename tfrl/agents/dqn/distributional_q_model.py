"""DistributionalQTFModel: the base of Q models with classic DQN's heads (classic RLlib's
`DistributionalQTFModel`), and NoisyDense, the noisy-net layer its heads use.

This is a model (a TFModel) for DQNTFPolicy (dqn_policy.py). A subclass implements `forward`
to return state features [B, num_outputs]; this class adds the heads on those features:

    features -> get_q_value_distributions() -> action scores (and, with num_atoms > 1, the
                                               logits of each action's return distribution)
    features -> get_state_value()           -> V(s) (dueling)

and `q_values_and_logits(features)` combines them as classic DQN does: with `dueling`,
Q = V + A - mean(A) (num_atoms 1), or the support logits of each action are centred over the
actions and shifted by the state's logits (num_atoms > 1, Q = E[Z]). Constructor keywords
(classic names, filled by the policy from the DQN config): `q_hiddens` (dense layers of each
head), `dueling`, `num_atoms` (> 1: distributional DQN over the support of `num_atoms` evenly
spaced returns in [v_min, v_max]), `use_noisy` (noisy-net layers, initial noise `sigma0`) and
`add_layer_norm` (layer normalisation after each hidden layer). A custom model overrides
`get_q_value_distributions` / `get_state_value` to change the heads.

`DenseDistributionalQModel` is the stock one: a dense trunk (`fcnet_hiddens`,
`fcnet_activation`) feeding the heads; DQN uses it when `num_atoms` > 1 or `noisy` is set
without a custom model.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.errors import InvalidConfigError
from tfrl.models.tf_model import TFModel


class NoisyDense(keras.layers.Layer):
    """A dense layer with factorised Gaussian noise on its weights (noisy nets, Fortunato et
    al. 2018): w = mu_w + sigma_w * (f(e_in) f(e_out)^T), b = mu_b + sigma_b * f(e_out),
    f(e) = sign(e) sqrt(|e|), new noise e ~ N(0, 1) at every call. sigma starts at
    sigma0 / sqrt(inputs)."""

    def __init__(self, units: int, sigma0: float = 0.5, activation=None, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.sigma0 = float(sigma0)
        self.activation = keras.activations.get(activation)

    def build(self, input_shape):
        fan_in = int(input_shape[-1])
        bound = 1.0 / np.sqrt(fan_in)
        sigma = self.sigma0 / np.sqrt(fan_in)
        self.mu_kernel = self.add_weight(
            name="mu_kernel", shape=(fan_in, self.units),
            initializer=keras.initializers.RandomUniform(-bound, bound))
        self.sigma_kernel = self.add_weight(name="sigma_kernel", shape=(fan_in, self.units),
                                            initializer=keras.initializers.Constant(sigma))
        self.mu_bias = self.add_weight(name="mu_bias", shape=(self.units,),
                                       initializer=keras.initializers.RandomUniform(-bound, bound))
        self.sigma_bias = self.add_weight(name="sigma_bias", shape=(self.units,),
                                          initializer=keras.initializers.Constant(sigma))
        super().build(input_shape)

    @staticmethod
    def _scaled_noise(size):
        noise = tf.random.normal([size])
        return tf.sign(noise) * tf.sqrt(tf.abs(noise))

    def call(self, inputs):
        noise_in = self._scaled_noise(int(self.mu_kernel.shape[0]))
        noise_out = self._scaled_noise(self.units)
        kernel = self.mu_kernel + self.sigma_kernel * tf.tensordot(noise_in, noise_out, axes=0)
        bias = self.mu_bias + self.sigma_bias * noise_out
        return self.activation(tf.matmul(inputs, kernel) + bias)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "sigma0": self.sigma0,
                "activation": keras.activations.serialize(self.activation)}


def _hidden_layers(x, sizes, use_noisy, sigma0, add_layer_norm, prefix):
    for i, size in enumerate(sizes):
        if use_noisy:
            x = NoisyDense(size, sigma0, activation="relu", name=f"{prefix}_hidden_{i}")(x)
        else:
            x = keras.layers.Dense(size, activation="relu", name=f"{prefix}_hidden_{i}")(x)
        if add_layer_norm:
            x = keras.layers.LayerNormalization(name=f"{prefix}_norm_{i}")(x)
    return x


def _output_layer(x, units, use_noisy, sigma0, name):
    if use_noisy:
        return NoisyDense(units, sigma0, name=name)(x)
    return keras.layers.Dense(units, name=name)(x)


class DistributionalQTFModel(TFModel):
    """Q heads over a subclass's features; see the module docstring."""

    has_value_branch = False

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, *,
                 q_hiddens: Sequence[int] = (256,), dueling: bool = False, num_atoms: int = 1,
                 use_noisy: bool = False, v_min: float = -10.0, v_max: float = 10.0,
                 sigma0: float = 0.5, add_layer_norm: bool = False, **unused_options):
        """Raises:
            InvalidConfigError: num_atoms < 1, v_min >= v_max with num_atoms > 1, or no
                q_hiddens while the features are not one score per action.
        """
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        num_actions = int(action_space.n)
        self.num_atoms = int(num_atoms)
        self.dueling = bool(dueling)
        if self.num_atoms < 1:
            raise InvalidConfigError(f"num_atoms must be at least 1, got {num_atoms}.")
        if self.num_atoms > 1 and not float(v_min) < float(v_max):
            raise InvalidConfigError(f"distributional DQN needs v_min < v_max, got {v_min}, "
                                     f"{v_max}.")
        if not q_hiddens and num_outputs != num_actions * self.num_atoms:
            raise InvalidConfigError(
                f"without hiddens the model's outputs are the action scores, so num_outputs "
                f"must be {num_actions * self.num_atoms}, got {num_outputs}.")
        self.v_min, self.v_max = float(v_min), float(v_max)
        self.support = tf.constant(
            np.linspace(v_min, v_max, self.num_atoms) if self.num_atoms > 1 else [0.0],
            tf.float32)
        features = keras.Input(shape=(num_outputs,), name="model_out")
        if q_hiddens:
            action_out = _hidden_layers(features, q_hiddens, use_noisy, sigma0, add_layer_norm,
                                        "action_value")
            scores = _output_layer(action_out, num_actions * self.num_atoms, use_noisy, sigma0,
                                   "action_value_out")
        else:  # the features are the scores (e.g. parametric-action models)
            scores = features
        self.q_value_head = keras.Model(features, scores, name=f"{name}_q_value_head")
        self.state_value_head = None
        if self.dueling:
            state_out = _hidden_layers(features, q_hiddens, use_noisy, sigma0, add_layer_norm,
                                       "state_value")
            state_score = _output_layer(state_out, self.num_atoms, use_noisy, sigma0,
                                        "state_value_out")
            self.state_value_head = keras.Model(features, state_score,
                                                name=f"{name}_state_value_head")

    def get_q_value_distributions(self, model_out):
        """Classic RLlib's head outputs for features `model_out`: (action_scores, logits,
        probs) with num_atoms 1, else (action_scores, support, support_logits_per_action,
        logits, probs); logits and probs [B, num_actions, num_atoms]."""
        scores = self.q_value_head(model_out)
        if self.num_atoms == 1:
            ones = tf.expand_dims(tf.ones_like(scores), -1)
            return scores, ones, ones
        logits = tf.reshape(scores, [-1, int(self.action_space.n), self.num_atoms])
        probs = tf.nn.softmax(logits)
        return (tf.reduce_sum(self.support * probs, axis=-1), self.support, logits, logits,
                probs)

    def get_state_value(self, model_out):
        """V(s) for features `model_out`: [B, num_atoms] (logits of its return distribution
        when num_atoms > 1)."""
        return self.state_value_head(model_out)

    def q_values_and_logits(self, model_out):
        """(Q-values [B, num_actions], support logits [B, num_actions, num_atoms] or None when
        num_atoms is 1): the heads combined as the module docstring says."""
        outputs = self.get_q_value_distributions(model_out)
        if self.num_atoms == 1:
            scores = outputs[0]
            if not self.dueling:
                return scores, None
            centred = scores - tf.reduce_mean(scores, axis=1, keepdims=True)
            return self.get_state_value(model_out) + centred, None
        logits = outputs[2]
        if self.dueling:
            centred = logits - tf.reduce_mean(logits, axis=1, keepdims=True)
            logits = tf.expand_dims(self.get_state_value(model_out), 1) + centred
        q_values = tf.reduce_sum(self.support * tf.nn.softmax(logits), axis=-1)
        return q_values, logits


class DenseDistributionalQModel(DistributionalQTFModel):
    """A dense trunk (`fcnet_hiddens`, `fcnet_activation`) under the Q heads."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name,
                 **q_options):
        super().__init__(obs_space, action_space, num_outputs, model_config, name, **q_options)
        inputs = keras.Input(shape=self.preprocessor.shape, name="observations")
        x = inputs
        for i, size in enumerate(self.model_config["fcnet_hiddens"]):
            x = keras.layers.Dense(size, activation=self.model_config["fcnet_activation"],
                                   name=f"fc_{i}")(x)
        self.trunk = keras.Model(inputs, x, name=f"{name}_trunk")

    def forward(self, input_dict, state, seq_lens):
        return self.trunk(input_dict["obs_flat"]), state


def feature_size(model_config: dict, hiddens: Optional[Sequence[int]], num_actions: int,
                 num_atoms: int) -> int:
    """The size of the features a DistributionalQTFModel's forward returns in DQN: the last
    trunk layer (classic RLlib: the last of fcnet_hiddens, else 256) when the heads have hidden
    layers, else the action scores themselves."""
    if hiddens:
        return int(([256] + list(model_config.get("fcnet_hiddens") or []))[-1])
    return num_actions * num_atoms
