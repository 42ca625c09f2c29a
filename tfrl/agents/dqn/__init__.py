"""Deep Q-networks: target network, double Q, dueling heads, n-step returns, prioritized replay;
Ape-X (distributed prioritized replay over several replay shards).

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"APEX_DEFAULT_CONFIG": "tfrl.agents.dqn.apex", "ApexTrainer": "tfrl.agents.dqn.apex",
            "DEFAULT_CONFIG": "tfrl.agents.dqn.config", "DQNTrainer": "tfrl.agents.dqn.dqn",
            "DQNTFPolicy": "tfrl.agents.dqn.dqn_policy", "QNetwork": "tfrl.agents.dqn.dqn_model"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
