"""Classic `ray.rllib.utils.framework`: `try_import_tf` and `try_import_torch`.

Ray 0.8 returned the tf module (`tf = try_import_tf()`), Ray 1.x a triple
(`tf1, tf, tfv = try_import_tf()`). Here the result serves both: a (tf.compat.v1, tf, 2) tuple
whose attributes are those of the tf module.

`tf.keras` (and `tf1.keras`) of what it returns is tf_keras, the Keras 2 that tfrl's models are
built with and that classic RLlib's TensorFlow had as `tf.keras`: a model written as
`tf.keras.Model(...)` inside a TFModelV2 is then a tf.Module whose variables the model finds
itself, as tfrl's own models are. (TensorFlow's own `tf.keras` is Keras 3 since TF 2.16.)

`tf1.layers` is tf_keras's TF1 layers (`dense`, `batch_normalization`, ...), which
`tf.compat.v1.layers` was until Keras 3 took their place. Variables they create in a model's
`forward` under `tf1.variable_scope` are kept and reused by the model (tfrl/models/tf_model.py),
as a TF1 graph's variable scopes did."""
import types
from typing import Any


class _KerasTwoView(types.ModuleType):
    """A TensorFlow module (tf or tf.compat.v1) whose `keras` attribute is tf_keras."""

    def __init__(self, module):
        super().__init__(module.__name__, getattr(module, "__doc__", None))
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name == "keras":
            import tf_keras

            return tf_keras
        if name == "layers" and self._module.__name__.endswith("compat.v1"):
            from tf_keras.api._v1.keras.__internal__.legacy import layers

            return layers
        return getattr(self._module, name)

    def __dir__(self):
        return dir(self._module)

    def __reduce__(self):
        # functions that use the returned `tf` capture it; Ray pickles them (cloudpickle) to
        # send a policy or trainer class to another process, where the view is made again
        return _keras_two_view, (self._module.__name__,)


def _keras_two_view(module_name: str) -> _KerasTwoView:
    import importlib

    return _KerasTwoView(importlib.import_module(module_name))


class _TFImport(tuple):
    def __getattr__(self, name: str) -> Any:
        return getattr(self[1], name)


def try_import_tf(error: bool = False):
    """TensorFlow, as both classic forms want it (module docstring)."""
    import tensorflow as tf

    return _TFImport((_KerasTwoView(tf.compat.v1), _KerasTwoView(tf), 2))


class _TorchModuleStandIn:
    """torch.nn.Module as classic RLlib has it without torch: a base that torch model classes
    can derive from at import time; constructing one raises FrameworkNotAvailableError."""

    def __init__(self, *args, **kwargs):
        from tfrl.errors import FrameworkNotAvailableError

        raise FrameworkNotAvailableError(
            f"{type(self).__name__} is a torch model and tfrl runs TensorFlow only; use a "
            "TFModelV2 (framework 'tf' or 'tf2')")


class _TorchNNStandIn:
    """torch.nn as classic RLlib 1.x returns it without torch: `Module` to derive from,
    `functional` None."""

    Module = _TorchModuleStandIn
    functional = None


def try_import_torch(error: bool = False):
    """(None, a torch.nn stand-in), as classic RLlib 1.x returns them without torch: tfrl runs
    on TensorFlow only. The stand-in's `nn.Module` lets classic modules define their torch
    models at import time; constructing one raises FrameworkNotAvailableError.

    Raises:
      ImportError: with `error=True`.
    """
    if error:
        raise ImportError("tfrl runs on TensorFlow only; there is no torch framework")
    return None, _TorchNNStandIn()


__all__ = ["try_import_tf", "try_import_torch"]
