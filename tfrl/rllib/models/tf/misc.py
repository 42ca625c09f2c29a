"""Classic `ray.rllib.models.tf.misc`: `normc_initializer`, `get_activation_fn` (its place in
Ray 0.8) and `flatten`. The TF1 graph helpers `conv2d` and `linear` (variables made with
`tf.get_variable`) have no TensorFlow 2 equivalent here: use Keras layers."""
from tfrl.models.layer_helpers import flatten, get_activation_fn, normc_initializer

__all__ = ["normc_initializer", "get_activation_fn", "flatten"]
