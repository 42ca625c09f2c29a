"""APPO trainer: APPOTrainer, IMPALA's trainer (impala.py) with the AsyncPPOTFPolicy.

This is an algorithm's trainer declaration, a `with_updates` of ImpalaTrainer: the same
asynchronous data path (AsyncSamplesOptimizer, trajectory fragments in a learner queue table),
with PPO's clipped surrogate on V-trace advantages as the loss (appo_policy.py).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.impala.appo_policy import AsyncPPOTFPolicy
from tfrl.agents.impala.config import APPO_DEFAULT_CONFIG
from tfrl.agents.impala.impala import ImpalaTrainer
from tfrl.agents.impala.impala import validate_config as validate_impala_config
from tfrl.errors import InvalidConfigError


def validate_config(config: dict) -> None:
    """APPO settings check: IMPALA's, and a clip_param in (0, 1).

    Raises:
        InvalidConfigError: see impala.validate_config; clip_param outside (0, 1).
    """
    validate_impala_config(config)
    if not 0.0 < config["clip_param"] < 1.0:
        raise InvalidConfigError(f"clip_param must be in (0, 1), got {config['clip_param']}")


APPOTrainer = ImpalaTrainer.with_updates(
    name="APPO",
    default_policy=AsyncPPOTFPolicy,
    default_config=APPO_DEFAULT_CONFIG,
    validate_config=validate_config,
)
