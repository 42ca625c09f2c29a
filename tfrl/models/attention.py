"""Transformer models for recurrent policies: GTrXLNet, the gated transformer-XL of Parisotto et
al. 2019 ("Stabilizing Transformers for Reinforcement Learning"), and TrXLNet, a plain
transformer over a sliding window of observations; classic RLlib's
`ray.rllib.models.tf.attention_net` (re-exported by tfrl/rllib/models/tf/attention_net.py).

Both are RecurrentNetworks (tfrl/models/recurrent.py): a policy carries their state from step to
step while sampling (T = 1) and feeds each train sequence (T up to `max_seq_len`) the state
recorded at its first step. Their state keeps classic RLlib's layout:

- state[0]: the last `max_seq_len` observations [max_seq_len, obs_dim] (zeros before the
  episode's first), the window TrXLNet attends over;
- GTrXLNet also: one memory per transformer unit [memory_tau, attn_dim], that unit's inputs at
  the last `memory_tau` steps (Transformer-XL's segment recurrence; zeros before the episode).

A GTrXLNet step attends to its own unit input and the `memory_tau` before it, whether those
came as memory or as earlier steps of the same train sequence, so learning recomputes what
sampling computed (up to the weights the memory was made with). The layers are in
gru_gate.py, skip_connection.py and multi_head_attention.py.
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.models.gru_gate import GRUGate
from tfrl.models.multi_head_attention import RelativeMultiHeadAttention
from tfrl.models.recurrent import RecurrentNetwork
from tfrl.models.skip_connection import SkipConnection


class PositionwiseFeedforward(keras.layers.Layer):
    """The transformer's two-layer MLP applied to each step on its own: Dense(hidden_dim, ReLU)
    then Dense(out_dim, output_activation)."""

    def __init__(self, out_dim: int, hidden_dim: int, output_activation=None, **kwargs):
        super().__init__(**kwargs)
        self._hidden_layer = keras.layers.Dense(hidden_dim, activation=tf.nn.relu)
        self._output_layer = keras.layers.Dense(out_dim, activation=output_activation)

    def call(self, inputs):
        return self._output_layer(self._hidden_layer(inputs))


def last_steps(steps, seq_lens, count: int):
    """Of `steps` [B, count + T, ...] (a state of `count` steps followed by T input steps), each
    row's `count` steps that end at its last real input step (`seq_lens` [B]); rows with
    seq_lens 0 keep their state."""
    index = tf.cast(seq_lens, tf.int32)[:, None] + tf.range(count)[None, :]
    return tf.gather(steps, index, axis=1, batch_dims=1)


class _TransformerNet(RecurrentNetwork):
    """What both transformer models share: the observation width, the values head's output and
    the observation window."""

    def __init__(self, observation_space, action_space, num_outputs, model_config, name):
        super().__init__(observation_space, action_space, num_outputs, model_config, name)
        self.max_seq_len = int(self.model_config["max_seq_len"])
        self.obs_dim = int(np.prod(observation_space.shape))
        self._value_out = None

    def _observation_window(self, window, inputs, seq_lens):
        return last_steps(tf.concat([tf.cast(window, inputs.dtype), inputs], axis=1),
                          seq_lens, self.max_seq_len)

    def value_function(self):
        return tf.reshape(self._value_out, [-1])


class GTrXLNet(_TransformerNet):
    """The gated transformer-XL (GTrXL-I of Parisotto et al. 2019) as a recurrent model.

    Observations are embedded to `attn_dim`; each of the `num_transformer_units` units is

        y = RelativeMultiHeadAttention(LayerNorm([memory, x])) with ReLU;  x = GRUGate(x, y)
        y = PositionwiseFeedforward(LayerNorm(x)) with ReLU;               x = GRUGate(x, y)

    and linear heads give the logits and the values (`value_function()`). Use it as a custom
    model of PPO or IMPALA with the options below as `custom_model_config`, e.g.
    `{"custom_model": GTrXLNet, "max_seq_len": 50, "custom_model_config": {"attn_dim": 64}}`.

    Args:
        num_transformer_units: the number of transformer units L.
        attn_dim: the width of the units' inputs and outputs.
        num_heads: the number of attention heads H.
        memory_tau: how many earlier steps each unit's memory holds (and attention reaches).
        head_dim: the width d of one head.
        ff_hidden_dim: the hidden width of the position-wise MLP.
        init_gate_bias: the GRU gates' initial bias (gates start near the identity).
    """

    def __init__(self, observation_space, action_space, num_outputs, model_config, name,
                 num_transformer_units: int = 1, attn_dim: int = 64, num_heads: int = 2,
                 memory_tau: int = 50, head_dim: int = 32, ff_hidden_dim: int = 32,
                 init_gate_bias: float = 2.0):
        super().__init__(observation_space, action_space, num_outputs, model_config, name)
        self.num_transformer_units = int(num_transformer_units)
        self.attn_dim = int(attn_dim)
        self.num_heads = int(num_heads)
        self.memory_tau = int(memory_tau)
        self.head_dim = int(head_dim)

        observations = keras.Input(shape=(None, self.obs_dim), name="inputs")
        memory_ins = [keras.Input(shape=(self.memory_tau, self.attn_dim), name=f"memory_in_{i}")
                      for i in range(self.num_transformer_units)]
        x = keras.layers.Dense(self.attn_dim, name="embedding")(observations)
        unit_inputs = []
        for i in range(self.num_transformer_units):
            unit_inputs.append(x)
            attention = RelativeMultiHeadAttention(
                self.attn_dim, num_heads, head_dim, input_layernorm=True,
                output_activation=tf.nn.relu, max_distance=self.memory_tau)
            x = SkipConnection(attention, fan_in_layer=GRUGate(init_gate_bias),
                               name=f"mha_{i + 1}")(x, memory=memory_ins[i])
            mlp = keras.Sequential([
                keras.layers.LayerNormalization(axis=-1),
                PositionwiseFeedforward(self.attn_dim, ff_hidden_dim,
                                        output_activation=tf.nn.relu)])
            x = SkipConnection(mlp, fan_in_layer=GRUGate(init_gate_bias),
                               name=f"pos_wise_mlp_{i + 1}")(x)
        logits = keras.layers.Dense(self.num_outputs, name="logits")(x)
        values = keras.layers.Dense(1, name="values")(x)
        self.trxl_model = keras.Model([observations] + memory_ins,
                                      [logits, values] + unit_inputs, name=f"{name}_gtrxl")

    def forward_rnn(self, inputs, state, seq_lens):
        window, memories = state[0], list(state[1:])
        memories = [tf.cast(m, inputs.dtype) for m in memories]
        logits, self._value_out, *unit_inputs = self.trxl_model([inputs] + memories)
        new_memories = [
            last_steps(tf.concat([memory, tf.stop_gradient(unit_input)], axis=1), seq_lens,
                       self.memory_tau)
            for memory, unit_input in zip(memories, unit_inputs)]
        return logits, [self._observation_window(window, inputs, seq_lens)] + new_memories

    def get_initial_state(self):
        return [np.zeros((self.max_seq_len, self.obs_dim), np.float32)] + [
            np.zeros((self.memory_tau, self.attn_dim), np.float32)
            for _ in range(self.num_transformer_units)]


class TrXLNet(_TransformerNet):
    """A transformer (Vaswani et al. 2017, with Transformer-XL's relative positions) over a
    sliding window: each step attends to the `max_seq_len` observations ending at it (the
    window in the state, then the input steps). Units are post-LayerNorm:
    `x = LayerNorm(x + attention(x))`, `x = LayerNorm(x + PositionwiseFeedforward(x))`; linear
    heads give the logits and the values.

    Args:
        num_transformer_units: the number of transformer units.
        attn_dim: the width of the units' inputs and outputs.
        num_heads: the number of attention heads.
        head_dim: the width of one head.
        ff_hidden_dim: the hidden width of the position-wise MLP.
    """

    def __init__(self, observation_space, action_space, num_outputs, model_config, name,
                 num_transformer_units: int = 1, attn_dim: int = 64, num_heads: int = 2,
                 head_dim: int = 32, ff_hidden_dim: int = 32):
        super().__init__(observation_space, action_space, num_outputs, model_config, name)
        self.num_transformer_units = int(num_transformer_units)
        self.attn_dim = int(attn_dim)
        self.num_heads = int(num_heads)
        self.head_dim = int(head_dim)

        observations = keras.Input(shape=(None, self.obs_dim), name="inputs")
        x = keras.layers.Dense(self.attn_dim, name="embedding")(observations)
        for i in range(self.num_transformer_units):
            attention = RelativeMultiHeadAttention(self.attn_dim, num_heads, head_dim,
                                                   max_distance=self.max_seq_len - 1)
            x = keras.layers.LayerNormalization(axis=-1)(
                SkipConnection(attention, name=f"mha_{i + 1}")(x))
            x = keras.layers.LayerNormalization(axis=-1)(
                SkipConnection(PositionwiseFeedforward(self.attn_dim, ff_hidden_dim),
                               name=f"pos_wise_mlp_{i + 1}")(x))
        logits = keras.layers.Dense(self.num_outputs, name="logits")(x)
        values = keras.layers.Dense(1, name="values")(x)
        self.base_model = keras.Model([observations], [logits, values], name=f"{name}_trxl")

    def forward_rnn(self, inputs, state, seq_lens):
        window = tf.cast(state[0], inputs.dtype)
        logits, values = self.base_model(tf.concat([window, inputs], axis=1))
        self._value_out = values[:, self.max_seq_len:]
        return logits[:, self.max_seq_len:], [self._observation_window(window, inputs, seq_lens)]

    def get_initial_state(self):
        return [np.zeros((self.max_seq_len, self.obs_dim), np.float32)]
