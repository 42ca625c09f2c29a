"""CQL trainer: DEFAULT_CONFIG and CQLTrainer (SAC's trainer with the CQL policy).

This is an algorithm's trainer declaration: the policy is CQLTFPolicy (cql_policy.py), the
policy optimizer SAC's SyncReplayOptimizer. CQL is meant for recorded experience: with
`input: DIR` the rollout workers read the recorded transitions instead of playing the env, and
they reach the learner through the replay table as sampled ones would; evaluation workers
(`evaluation_interval`, `evaluation_num_episodes`) play the env to measure the learnt policy.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.cql.config import DEFAULT_CONFIG
from tfrl.agents.cql.cql_policy import CQLTFPolicy
from tfrl.agents.sac.sac import SACTrainer
from tfrl.agents.sac.sac import validate_config as validate_sac_config
from tfrl.errors import InvalidConfigError


def validate_config(config: dict) -> None:
    """CQL settings check.

    Raises:
        InvalidConfigError: SAC's checks; also a non-positive min_q_weight, temperature or
            num_actions, or a negative bc_iters.
    """
    validate_sac_config(config)
    for key in ("min_q_weight", "temperature", "num_actions"):
        if float(config[key]) <= 0:
            raise InvalidConfigError(f"CQL: {key} must be > 0, got {config[key]}.")
    if int(config["bc_iters"]) < 0:
        raise InvalidConfigError(f"CQL: bc_iters must be >= 0, got {config['bc_iters']}.")


CQLTrainer = SACTrainer.with_updates(
    name="CQL",
    default_policy=CQLTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
)
