"""TensorFlow helpers shared by the algorithms' losses and stats (no algorithm owns them)."""
from __future__ import annotations

import tensorflow as tf


def explained_variance(targets, predictions):
    """1 - Var[targets - predictions] / Var[targets], floored at -1."""
    _, target_var = tf.nn.moments(targets, axes=[0])
    _, diff_var = tf.nn.moments(targets - predictions, axes=[0])
    return tf.maximum(-1.0, 1.0 - diff_var / (target_var + 1e-8))
