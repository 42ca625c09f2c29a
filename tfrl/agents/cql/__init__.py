"""Conservative Q-learning (CQL) on SAC, for learning from recorded experience.

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.cql.config", "CQLTrainer": "tfrl.agents.cql.cql",
            "CQLTFPolicy": "tfrl.agents.cql.cql_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
