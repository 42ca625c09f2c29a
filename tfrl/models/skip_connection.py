"""SkipConnection: a residual (or gated) connection around one layer, for the transformer
blocks of tfrl/models/attention.py; classic RLlib's `ray.rllib.models.tf.layers.SkipConnection`
(re-exported by tfrl/rllib/models/tf/layers.py). A tf_keras layer.
"""
from __future__ import annotations

import tf_keras as keras


class SkipConnection(keras.layers.Layer):
    """`layer(x) + x`, or with a `fan_in_layer` (e.g. a GRUGate) `fan_in_layer((x, layer(x)))`.

    Keyword arguments of the call (e.g. an attention layer's `memory`) go to `layer`.

    Args:
        layer: the wrapped layer; its output has the width of its input.
        fan_in_layer: an optional layer combining the input and the wrapped layer's output,
            called on the pair `(input, output)`; None adds them.
    """

    def __init__(self, layer, fan_in_layer=None, add_memory=False, **kwargs):
        # add_memory: accepted for classic RLlib's signature; it never had an effect
        del add_memory
        super().__init__(**kwargs)
        self._layer = layer
        self._fan_in_layer = fan_in_layer

    def call(self, inputs, **kwargs):
        outputs = self._layer(inputs, **kwargs)
        if self._fan_in_layer is None:
            return outputs + inputs
        return self._fan_in_layer((inputs, outputs))
