"""Evolution strategies (Salimans et al., 2017): antithetic perturbations evaluated by Ray
actors, a shared noise table, centered-rank shaping, Adam, and an aggregation tree.

Names are imported on first use (PEP 562): the workers and aggregators import this package's
modules without TensorFlow.
"""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.es.config", "ESTrainer": "tfrl.agents.es.es",
            "ESPolicy": "tfrl.agents.es.es_policy"}

__all__ = list(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
