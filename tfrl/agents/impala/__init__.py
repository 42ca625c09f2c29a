"""IMPALA (V-trace, asynchronous sampling into a learner queue table) and APPO (its PPO
variant).

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.impala.config",
            "ImpalaTrainer": "tfrl.agents.impala.impala",
            "VTraceTFPolicy": "tfrl.agents.impala.impala_policy",
            "APPO_DEFAULT_CONFIG": "tfrl.agents.impala.config",
            "APPOTrainer": "tfrl.agents.impala.appo",
            "AsyncPPOTFPolicy": "tfrl.agents.impala.appo_policy"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
