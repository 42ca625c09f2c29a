"""Algorithm names -> trainer classes, imported lazily so `tfrl --help` stays fast."""
from __future__ import annotations

import importlib

from tfrl import errors

ALGORITHMS = {
    "PG": ("tfrl.agents.pg.pg", "PGTrainer"),
    "A2C": ("tfrl.agents.a3c.a2c", "A2CTrainer"),
    "A3C": ("tfrl.agents.a3c.a3c", "A3CTrainer"),
    "PPO": ("tfrl.agents.ppo.ppo", "PPOTrainer"),
    "DQN": ("tfrl.agents.dqn.dqn", "DQNTrainer"),
    "IMPALA": ("tfrl.agents.impala.impala", "ImpalaTrainer"),
    "APPO": ("tfrl.agents.impala.appo", "APPOTrainer"),
    "MARWIL": ("tfrl.agents.marwil.marwil", "MARWILTrainer"),
    "BC": ("tfrl.agents.marwil.marwil", "BCTrainer"),
    "DDPG": ("tfrl.agents.ddpg.ddpg", "DDPGTrainer"),
    "TD3": ("tfrl.agents.ddpg.td3", "TD3Trainer"),
    "SAC": ("tfrl.agents.sac.sac", "SACTrainer"),
    "CQL": ("tfrl.agents.cql.cql", "CQLTrainer"),
    "APEX": ("tfrl.agents.dqn.apex", "ApexTrainer"),
    "APEX_DDPG": ("tfrl.agents.ddpg.apex_ddpg", "ApexDDPGTrainer"),
    "ES": ("tfrl.agents.es.es", "ESTrainer"),
    "ARS": ("tfrl.agents.ars.ars", "ARSTrainer"),
}


def get_trainer_class(name: str):
    """Returns the trainer class registered under `name` (e.g. "PPO").

    Raises:
      InvalidConfigError: unknown algorithm name; the message lists the known ones.
    """
    if name not in ALGORITHMS:
        raise errors.InvalidConfigError(
            f"unknown algorithm {name!r}; choose one of {', '.join(sorted(ALGORITHMS))}")
    module_name, class_name = ALGORITHMS[name]
    return getattr(importlib.import_module(module_name), class_name)
