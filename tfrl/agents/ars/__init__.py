"""Augmented random search (Mania et al., 2018), built from ES's parts.

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.ars.config", "ARSTrainer": "tfrl.agents.ars.ars"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
