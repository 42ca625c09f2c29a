"""Vanilla policy gradient (REINFORCE): returns-to-go weight the log-likelihood of actions.

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.pg.config", "PGTrainer": "tfrl.agents.pg.pg",
            "PGTFPolicy": "tfrl.agents.pg.pg_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
