"""Proximal policy optimisation: clipped surrogate, adaptive KL penalty, GAE, value clipping.

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.ppo.config", "PPOTrainer": "tfrl.agents.ppo.ppo",
            "PPOTFPolicy": "tfrl.agents.ppo.ppo_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
