"""Classic `ray.rllib.utils.framework`: `try_import_tf` and `try_import_torch`.

Ray 0.8 returned the tf module (`tf = try_import_tf()`), Ray 1.x a triple
(`tf1, tf, tfv = try_import_tf()`). Here the result serves both: a (tf.compat.v1, tf, 2) tuple
whose attributes are those of the tf module."""
from typing import Any


class _TFImport(tuple):
    def __getattr__(self, name: str) -> Any:
        return getattr(self[1], name)


def try_import_tf(error: bool = False):
    """TensorFlow, as both classic forms want it (module docstring)."""
    import tensorflow as tf

    return _TFImport((tf.compat.v1, tf, 2))


def try_import_torch(error: bool = False):
    """(None, None): tfrl runs on TensorFlow only.

    Raises:
      ImportError: with `error=True`.
    """
    if error:
        raise ImportError("tfrl runs on TensorFlow only; there is no torch framework")
    return None, None


__all__ = ["try_import_tf", "try_import_torch"]
