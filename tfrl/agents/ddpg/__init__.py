"""Deterministic actor-critic: DDPG, TD3 (twin Q, target policy smoothing, delayed policy
updates) as a config of it, and Ape-X DDPG (DDPG under Ape-X's distributed prioritized replay).

Names are imported on first use (PEP 562): a rollout worker that imports the policy
module does not import the trainer (and Ray Tune with it)."""
from tfrl.utils.lazy_exports import lazy_exports

_EXPORTS = {"DEFAULT_CONFIG": "tfrl.agents.ddpg.config", "TD3_CONFIG": "tfrl.agents.ddpg.config",
            "DDPGTrainer": "tfrl.agents.ddpg.ddpg", "TD3Trainer": "tfrl.agents.ddpg.td3",
            "DDPGTFPolicy": "tfrl.agents.ddpg.ddpg_policy",
            "APEX_DDPG_DEFAULT_CONFIG": "tfrl.agents.ddpg.apex_ddpg",
            "ApexDDPGTrainer": "tfrl.agents.ddpg.apex_ddpg"}

__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
