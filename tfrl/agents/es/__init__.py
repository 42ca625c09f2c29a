"""Evolution strategies (Salimans et al., 2017): antithetic perturbations evaluated by Ray
actors, a shared noise table, centered-rank shaping, Adam, and an aggregation tree.

Names are imported on first use (PEP 562): the workers and aggregators import this package's
modules without TensorFlow.
"""
import importlib
from typing import Any

_EXPORTS = {"DEFAULT_CONFIG": "config", "ESTrainer": "es", "ESPolicy": "es_policy"}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
