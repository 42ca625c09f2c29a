"""The layout of the fragment items tfrl's replay writers fill (tfrl/rollout/replay_output.py)
and its readers take apart (replay_input.py, the optimizers): which rows' `new_obs` is the next
row's `obs`, and is therefore stored once.
"""
from __future__ import annotations

import numpy as np


def repeated_next_obs_mask(terminateds, truncateds, item_length: int):
    """True for the rows of fragment items whose next observation is the next row's
    observation: neither an episode end nor an item's last step (numpy or TF inputs, rows of
    whole items in order)."""
    if isinstance(terminateds, np.ndarray):
        ended = np.asarray(terminateds, bool) | np.asarray(truncateds, bool)
        last = np.arange(len(ended)) % item_length == item_length - 1
        return ~ended & ~last
    import tensorflow as tf

    ended = tf.logical_or(tf.cast(terminateds, tf.bool), tf.cast(truncateds, tf.bool))
    steps = tf.range(tf.shape(ended)[-1])
    return tf.logical_and(tf.logical_not(ended), steps < item_length - 1)
