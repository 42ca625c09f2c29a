"""GRUGate: the gating layer of the gated transformer-XL (tfrl/models/attention.py).

Parisotto et al. 2019, "Stabilizing Transformers for Reinforcement Learning", eq. (9)-(12):
a GRU-style gate that replaces the residual connection around each transformer sublayer. It
combines the residual stream `x` with the sublayer's output `y`:

    r = sigmoid(W_r y + U_r x)
    z = sigmoid(W_z y + U_z x - b_g)
    h = tanh(W_g y + U_g (r * x))
    out = (1 - z) * x + z * h

With a positive gate bias `b_g` (`init_bias`) the gate starts close to the identity on `x`,
which is what makes the transformer learn reliably in RL. A tf_keras layer; classic RLlib's
name `ray.rllib.models.tf.layers.GRUGate` (tfrl/rllib/models/tf/layers.py).
"""
from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


class GRUGate(keras.layers.Layer):
    """GRU-style gating of a residual stream by a sublayer's output.

    Called on a pair `(x, y)`: `x` the residual stream (the sublayer's input, classic RLlib's
    "state" input) and `y` the sublayer's output, both [..., dim]; returns [..., dim].

    Args:
        init_bias: the initial value of the gate bias `b_g` (the larger, the closer the gate
            starts to passing `x` through unchanged).
    """

    def __init__(self, init_bias: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self._init_bias = float(init_bias)

    def build(self, input_shape):
        x_shape, y_shape = input_shape
        dim = int(x_shape[-1])
        if int(y_shape[-1]) != dim:
            raise ValueError(
                f"GRUGate needs both inputs of one width, got {x_shape[-1]} and {y_shape[-1]}.")
        # W_r, W_z, W_g side by side (applied to y); U_r, U_z side by side (applied to x)
        self._w = self.add_weight("w", shape=(dim, 3 * dim), initializer="glorot_uniform")
        self._u_rz = self.add_weight("u_rz", shape=(dim, 2 * dim), initializer="glorot_uniform")
        self._u_g = self.add_weight("u_g", shape=(dim, dim), initializer="glorot_uniform")
        self._gate_bias = self.add_weight(
            "gate_bias", shape=(dim,), initializer=keras.initializers.Constant(self._init_bias))
        super().build(input_shape)

    def call(self, inputs):
        x, y = inputs
        wy_r, wy_z, wy_g = tf.split(tf.tensordot(y, self._w, axes=1), 3, axis=-1)
        ux_r, ux_z = tf.split(tf.tensordot(x, self._u_rz, axes=1), 2, axis=-1)
        r = tf.sigmoid(wy_r + ux_r)
        z = tf.sigmoid(wy_z + ux_z - self._gate_bias)
        h = tf.tanh(wy_g + tf.tensordot(r * x, self._u_g, axes=1))
        return (1.0 - z) * x + z * h

    def get_config(self):
        return dict(super().get_config(), init_bias=self._init_bias)
