"""Soft actor-critic: twin Q, squashed Gaussian actor, automatic entropy tuning.

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.sac.config", "SACTrainer": "tfrl.agents.sac.sac",
            "SACTFPolicy": "tfrl.agents.sac.sac_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
