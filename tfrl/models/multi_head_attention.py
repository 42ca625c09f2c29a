"""Multi-head self-attention, the attention layers of tfrl's transformer models
(tfrl/models/attention.py); classic RLlib's `MultiHeadAttention` and `RelativeMultiHeadAttention`
(re-exported by tfrl/rllib/models/tf/layers.py). tf_keras layers on [B, T, dim] inputs.

- MultiHeadAttention: causal scaled dot-product self-attention (Vaswani et al. 2017).
- RelativeMultiHeadAttention: Transformer-XL's attention (Dai et al. 2019): queries of the T
  input steps attend to an optional memory of earlier steps (held fixed: no gradient flows into
  it) and to the input steps up to their own, scored with content and relative-position terms
  (sinusoid encodings of the distance, projected per head, plus the learnt biases u and v).
  `max_distance` limits how far back a query looks (a band: keys at distances 0..max_distance),
  so that a step sees the same keys whether the steps before it came as memory or as inputs.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

_MASKED = -1e9


def sinusoid_encoding(distances, dim: int):
    """[N, dim] sinusoid encodings (sines then cosines) of the float distances [N]."""
    inverse_freq = 1.0 / (10000.0 ** (tf.range(0, dim, 2.0) / dim))
    angles = tf.cast(distances, tf.float32)[:, None] * inverse_freq[None, :]
    return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)[:, :dim]


def relative_position_embedding(seq_length: int, out_dim: int):
    """Classic RLlib's Phi: [seq_length, out_dim] sinusoid encodings of the distances
    seq_length - 1, ..., 1, 0 (descending, as classic RLlib ordered them)."""
    return sinusoid_encoding(tf.range(seq_length - 1.0, -1.0, -1.0), out_dim)


def _split_heads(x, num_heads: int, head_dim: int):
    """[B, N, H * d] -> [B, N, H, d]."""
    return tf.reshape(x, [tf.shape(x)[0], tf.shape(x)[1], num_heads, head_dim])


def _attend(scores, values, valid, head_dim: int):
    """Softmax over the keys of the scores [B, H, Tq, Tk] (invalid keys masked out) applied to
    the values [B, Tk, H, d]: [B, Tq, H * d]."""
    scores = tf.where(valid[None, None], scores / np.sqrt(head_dim), _MASKED)
    weights = tf.nn.softmax(scores, axis=-1)
    out = tf.einsum("bhij,bjhd->bihd", weights, values)
    return tf.reshape(out, [tf.shape(out)[0], tf.shape(out)[1], values.shape[2] * head_dim])


class MultiHeadAttention(keras.layers.Layer):
    """Causal multi-head self-attention: each step attends to itself and the steps before it.

    Args:
        out_dim: the width of the output (a linear projection of the heads, no bias).
        num_heads: the number of attention heads H.
        head_dim: the width d of one head.
    """

    def __init__(self, out_dim: int, num_heads: int, head_dim: int, **kwargs):
        super().__init__(**kwargs)
        self._num_heads = int(num_heads)
        self._head_dim = int(head_dim)
        self._qkv_layer = keras.layers.Dense(3 * num_heads * head_dim, use_bias=False)
        self._linear_layer = keras.layers.Dense(out_dim, use_bias=False)

    def call(self, inputs):
        time = tf.shape(inputs)[1]
        queries, keys, values = [_split_heads(x, self._num_heads, self._head_dim) for x in
                                 tf.split(self._qkv_layer(inputs), 3, axis=-1)]
        scores = tf.einsum("bihd,bjhd->bhij", queries, keys)
        steps = tf.range(time)
        causal = steps[:, None] >= steps[None, :]
        return self._linear_layer(_attend(scores, values, causal, self._head_dim))


class RelativeMultiHeadAttention(keras.layers.Layer):
    """Transformer-XL multi-head attention with relative positions over an optional memory.

    Called as `layer(inputs [B, T, dim], memory=None or [B, tau, dim])`; returns [B, T, out_dim].
    The query of input step i (position tau + i) attends to the memory and input steps at
    positions tau + i - max_distance .. tau + i.

    Args:
        out_dim: the width of the output (a linear projection of the heads, no bias).
        num_heads: the number of attention heads H.
        head_dim: the width d of one head.
        rel_pos_encoder: an optional constant [N, enc_dim] matrix of relative-position
            encodings, rows for the distances N - 1, ..., 0 (classic RLlib's Phi, see
            `relative_position_embedding`); N must cover tau + T. None: sinusoid encodings of
            width `out_dim`, computed for the distances needed.
        input_layernorm: whether to layer-normalise the (memory and input) steps first, as the
            gated transformer-XL does.
        output_activation: an optional activation of the output (ReLU in the gated
            transformer-XL).
        max_distance: how many steps back a query may look; None: all of the memory and all
            earlier input steps.
    """

    def __init__(self, out_dim: int, num_heads: int, head_dim: int, rel_pos_encoder=None,
                 input_layernorm: bool = False, output_activation=None,
                 max_distance: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self._num_heads = int(num_heads)
        self._head_dim = int(head_dim)
        self._out_dim = int(out_dim)
        self._max_distance = None if max_distance is None else int(max_distance)
        self._qkv_layer = keras.layers.Dense(3 * num_heads * head_dim, use_bias=False)
        self._linear_layer = keras.layers.Dense(out_dim, use_bias=False,
                                                activation=output_activation)
        self._pos_proj = keras.layers.Dense(num_heads * head_dim, use_bias=False)
        # ascending distances 0, 1, ... (classic RLlib's matrix is descending)
        self._encodings = None if rel_pos_encoder is None else tf.constant(
            np.asarray(rel_pos_encoder, np.float32)[::-1])
        self._input_layernorm = keras.layers.LayerNormalization(axis=-1) \
            if input_layernorm else None

    def build(self, input_shape):
        shape = (self._num_heads, self._head_dim)
        self._u = self.add_weight("u", shape=shape, initializer="glorot_uniform")
        self._v = self.add_weight("v", shape=shape, initializer="glorot_uniform")
        super().build(input_shape)

    def _relative_encodings(self, length):
        if self._encodings is None:
            return sinusoid_encoding(tf.range(length), self._out_dim)
        return self._encodings[:length]

    def call(self, inputs, memory=None):
        heads, head_dim = self._num_heads, self._head_dim
        time = tf.shape(inputs)[1]
        steps = inputs
        if memory is not None:
            steps = tf.concat([tf.stop_gradient(tf.cast(memory, inputs.dtype)), inputs], axis=1)
        keys_len = tf.shape(steps)[1]
        tau = keys_len - time
        if self._input_layernorm is not None:
            steps = self._input_layernorm(steps)
        queries, keys, values = [_split_heads(x, heads, head_dim) for x in
                                 tf.split(self._qkv_layer(steps), 3, axis=-1)]
        queries = queries[:, tau:]
        content = tf.einsum("bihd,bjhd->bhij", queries + self._u, keys)
        # position scores by distance k = 0 .. keys_len - 1, then arranged by key j
        encodings = self._pos_proj(self._relative_encodings(keys_len))
        encodings = tf.reshape(encodings, [keys_len, heads, head_dim])
        by_distance = tf.einsum("bihd,khd->ikbh", queries + self._v, encodings)
        distance = (tau + tf.range(time))[:, None] - tf.range(keys_len)[None, :]  # [T, K]
        position = tf.gather(by_distance, tf.maximum(distance, 0), axis=1, batch_dims=1)
        position = tf.transpose(position, [2, 3, 0, 1])  # [T, K, B, H] -> [B, H, T, K]
        valid = distance >= 0
        if self._max_distance is not None:
            valid &= distance <= self._max_distance
        return self._linear_layer(_attend(content + position, values, valid, head_dim))
