"""Layer helpers custom TensorFlow models use: activation functions by config name, the
column-normalised initialiser and flattening. Classic RLlib models reach them as
`ray.rllib.models.tf.misc` and `ray.rllib.models.utils` (`tfrl.rllib.models...`)."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from tfrl import errors

# config names that mean "no activation"
LINEAR_NAMES = (None, "linear")


def get_activation_fn(name: Optional[str] = None, framework: str = "tf") -> Optional[Callable]:
    """The `tf.nn` activation named `name` ("relu", "tanh", "elu", "swish"/"silu", ...), or
    None for "linear" or None (a Dense layer's own default).

    Raises:
      InvalidConfigError: an unknown name, or a framework other than TensorFlow.
    """
    if framework not in ("tf", "tf2", "tfe"):
        raise errors.InvalidConfigError(
            f"get_activation_fn: framework {framework!r} is not available; tfrl runs TensorFlow "
            "only (framework 'tf' or 'tf2')")
    if name in LINEAR_NAMES:
        return None
    if name == "silu":
        name = "swish"
    fn = getattr(tf.nn, name, None) if isinstance(name, str) else None
    if not callable(fn):
        raise errors.InvalidConfigError(
            f"unknown activation {name!r}; use a tf.nn activation such as 'relu', 'tanh', "
            "'elu' or 'swish', or 'linear'")
    return fn


def normc_initializer(std: float = 1.0) -> Callable:
    """A kernel initializer: standard normal draws, each column (output unit) scaled to norm
    `std`. Draws come from numpy's global generator, so `np.random.seed` fixes them, as in
    classic RLlib. Usable as a Keras `kernel_initializer` (called with shape and dtype)."""
    def initializer(shape, dtype=None, partition_info=None):
        values = np.random.randn(*shape).astype(np.float32)
        values *= std / np.sqrt(np.square(values).sum(axis=0, keepdims=True))
        return tf.constant(values, dtype=tf.float32 if dtype is None else tf.as_dtype(dtype))

    return initializer


def flatten(x: tf.Tensor) -> tf.Tensor:
    """`x` reshaped to [batch, product of the other dimensions] (those must be known)."""
    return tf.reshape(x, [-1, int(np.prod(x.shape.as_list()[1:]))])
