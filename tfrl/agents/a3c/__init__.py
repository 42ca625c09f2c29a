"""Advantage actor-critic: A3C (asynchronous gradients) and A2C (synchronous batches).

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.a3c.config", "A3CTrainer": "tfrl.agents.a3c.a3c",
            "A2C_DEFAULT_CONFIG": "tfrl.agents.a3c.config", "A2CTrainer": "tfrl.agents.a3c.a2c",
            "A3CTFPolicy": "tfrl.agents.a3c.a3c_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
