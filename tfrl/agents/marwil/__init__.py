"""MARWIL (advantage-weighted imitation) and BC (its beta = 0), learning from recorded data.

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.marwil.config",
            "BC_DEFAULT_CONFIG": "tfrl.agents.marwil.marwil",
            "MARWILTrainer": "tfrl.agents.marwil.marwil", "BCTrainer": "tfrl.agents.marwil.marwil",
            "MARWILTFPolicy": "tfrl.agents.marwil.marwil_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
