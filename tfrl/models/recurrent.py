"""LSTMWrapper: adds an LSTM between any feature model and the policy/value heads; and
RecurrentNetwork, the base of custom recurrent models (classic RLlib's TF RecurrentNetwork).

Enabled by model config `use_lstm: True` (`lstm_cell_size`, `max_seq_len`; with
`lstm_use_prev_action_reward` the previous action and reward, encoded as prev_action_reward.py
says, are concatenated to the features at the LSTM's input). Inputs arrive as
rows [B*T, ...] that are B sequences of T steps each, padded (batch-major: row b*T + t), with
`seq_lens` [B] giving each sequence's true length; T is inferred as rows // B. When computing
actions, T = 1 and seq_lens are ones. The state is [h, c], each [B, lstm_cell_size]; padded
steps neither change the state nor matter (the LSTM is masked). Training batches are padded
into this layout by tfrl/policy/rnn_sequencing.py.
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.models.prev_action_reward import encoded_prev_action_reward, encoded_width
from tfrl.models.tf_model import TFModel


def add_time_dimension(rows, seq_lens):
    """[B*T, ...] rows -> [B, T, ...] using B = len(seq_lens)."""
    batch = tf.shape(seq_lens)[0]
    time = tf.shape(rows)[0] // batch
    return tf.reshape(rows, tf.concat([[batch, time], tf.shape(rows)[1:]], axis=0))


class LSTMWrapper(TFModel):
    """Feature model -> masked LSTM -> policy and value heads."""

    has_value_branch = True

    def __init__(self, feature_model: TFModel, obs_space, action_space, num_outputs,
                 model_config, name="lstm"):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.feature_model = feature_model
        self.cell_size = int(self.model_config["lstm_cell_size"])
        self.reads_prev_action_reward = bool(self.model_config["lstm_use_prev_action_reward"])
        width = feature_model.num_outputs
        if self.reads_prev_action_reward:
            width += encoded_width(action_space)
        features = keras.Input(shape=(None, width), name="features")
        mask = keras.Input(shape=(None,), dtype=tf.bool, name="mask")
        h_in = keras.Input(shape=(self.cell_size,), name="h")
        c_in = keras.Input(shape=(self.cell_size,), name="c")
        lstm_out, h_out, c_out = keras.layers.LSTM(
            self.cell_size, return_sequences=True, return_state=True, name="lstm")(
                features, mask=mask, initial_state=[h_in, c_in])
        logits = keras.layers.Dense(
            num_outputs, name="logits",
            kernel_initializer=keras.initializers.RandomNormal(stddev=0.01))(lstm_out)
        value = keras.layers.Dense(1, name="value_out")(lstm_out)
        self.rnn_model = keras.Model([features, mask, h_in, c_in],
                                     [logits, value, h_out, c_out], name=name)
        self._value_out = None

    def forward(self, input_dict, state, seq_lens):
        features, _ = self.feature_model.forward(input_dict, [], None)
        if self.reads_prev_action_reward:
            features = tf.concat([features, encoded_prev_action_reward(
                input_dict["prev_actions"], input_dict["prev_rewards"], self.action_space)],
                axis=1)
        if seq_lens is None:
            seq_lens = tf.ones(tf.shape(features)[:1], tf.int32)
        seq_lens = tf.cast(seq_lens, tf.int32)
        timed = add_time_dimension(features, seq_lens)
        mask = tf.sequence_mask(seq_lens, tf.shape(timed)[1])
        logits, value, h, c = self.rnn_model([timed, mask, state[0], state[1]])
        self._value_out = tf.reshape(value, [-1])
        return tf.reshape(logits, [-1, self.num_outputs]), [h, c]

    def value_function(self):
        return self._value_out

    def get_initial_state(self):
        return [np.zeros(self.cell_size, np.float32), np.zeros(self.cell_size, np.float32)]


class RecurrentNetwork(TFModel):
    """The base of a custom recurrent model: a subclass implements
    `forward_rnn(inputs [B, T, ...], state, seq_lens) -> (outputs [B, T, num_outputs], state)`
    and `get_initial_state()`; `forward` gives it the flat observations (one flat row per
    observation, images too, as classic RLlib's `obs_flat`) with the time dimension added
    (seq_lens ones when acting) and flattens its outputs back to rows.

    tfrl pads every sequence of a train batch to `max_seq_len`; classic RLlib padded them to the
    batch's longest sequence, and classic models rely on it (a Keras LSTM masked with
    `tf.sequence_mask(seq_lens)`, whose length is the longest sequence). So `forward_rnn` gets
    the batch cut to its longest sequence, and its outputs, and the rows of the subclass's
    `value_function()`, are padded back to `max_seq_len` steps with zeros (steps the loss
    masks out).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "value_function" in cls.__dict__:
            cls.value_function = _padded_back(cls.__dict__["value_function"])

    def forward(self, input_dict, state, seq_lens):
        inputs = input_dict["obs_flat"]
        if inputs.shape.rank is not None and inputs.shape.rank > 2:
            inputs = tf.reshape(inputs, [tf.shape(inputs)[0], -1])
        if seq_lens is None:
            seq_lens = tf.ones(tf.shape(inputs)[:1], tf.int32)
        seq_lens = tf.cast(seq_lens, tf.int32)
        padded = add_time_dimension(inputs, seq_lens)
        batch, time = tf.shape(padded)[0], tf.shape(padded)[1]
        longest = tf.clip_by_value(tf.reduce_max(seq_lens), 1, time)
        outputs, new_state = self.forward_rnn(padded[:, :longest], state, seq_lens)
        self._time_padding = (batch, time, longest)
        outputs = tf.reshape(outputs, [batch, longest, self.num_outputs])
        outputs = tf.pad(outputs, [[0, 0], [0, time - longest], [0, 0]])
        return tf.reshape(outputs, [-1, self.num_outputs]), new_state

    def forward_rnn(self, inputs, state, seq_lens):
        """Outputs [B, T, num_outputs] and the new state for inputs [B, T, ...]."""
        raise NotImplementedError


def _padded_back(value_function):
    """`value_function` whose B * longest rows (the cut batch's) come back as B * max_seq_len
    rows, zeros at the padded steps; rows already of that count are returned as they are."""

    @functools.wraps(value_function)
    def padded(self):
        values = value_function(self)
        padding = getattr(self, "_time_padding", None)
        if padding is None:
            return values
        batch, time, longest = padding
        rows = tf.shape(values)[0]

        def pad():
            cut = tf.reshape(values, [batch, longest])
            return tf.reshape(tf.pad(cut, [[0, 0], [0, time - longest]]), [-1])

        return tf.cond(tf.equal(rows, batch * longest), pad, lambda: tf.reshape(values, [-1]))

    return padded
