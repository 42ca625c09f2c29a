"""tf.data options for the iterators tfrl makes itself (learners' and offline readers' inputs).

Without autotuning, an iterator has no model thread: TensorFlow's iterator destructor joins that
thread, and an iterator that a garbage collection finds later (a trainer or reader dropped
without `stop()`) then held the collecting thread, and with it the process, for a minute or
two at times. These pipelines have nothing for autotuning to tune: their parallelism and
buffers are fixed where they are built.
"""
from __future__ import annotations

import tensorflow as tf


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning turned off for the iterators made over it."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
