"""IMPALA trainer: ImpalaTrainer (importance-weighted actor-learner, Espeholt et al. 2018).

This is an algorithm's trainer declaration: the policy is VTraceTFPolicy (impala_policy.py); the
policy optimizer is AsyncSamplesOptimizer: rollout workers sample without waiting for the
learner and write trajectory fragments into a replay Queue table, a learner thread learns on
them with V-trace and returning workers get the newest weights. APPO (appo.py) is this trainer
with PPO's clipped surrogate in the loss.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.impala.config import DEFAULT_CONFIG
from tfrl.agents.impala.impala_policy import VTraceTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """IMPALA settings check.

    Raises:
        InvalidConfigError: negative loss coefficients, V-trace thresholds that are not
            positive, or rollout settings that do not give whole fragments (see
            optimizers.async_samples_optimizer.check_fragment_config).
    """
    from tfrl.optimizers.async_samples_optimizer import check_fragment_config

    for key in ("entropy_coeff", "vf_loss_coeff"):
        if config[key] < 0:
            raise InvalidConfigError(f"{key} must be >= 0, got {config[key]}")
    for key in ("vtrace_clip_rho_threshold", "vtrace_clip_c_threshold",
                "vtrace_clip_pg_rho_threshold"):
        if config[key] is not None and config[key] <= 0:
            raise InvalidConfigError(
                f"{key} must be > 0 (or None for no clipping), got {config[key]}")
    if config["opt_type"] not in ("adam", "rmsprop"):
        raise InvalidConfigError(
            f"opt_type must be \"adam\" or \"rmsprop\", got {config['opt_type']!r}")
    if config["opt_type"] == "rmsprop" and not config["epsilon"] > 0:
        raise InvalidConfigError(f"epsilon (RMSProp's) must be > 0, got {config['epsilon']}")
    check_fragment_config(config)


def make_policy_optimizer(workers, config, replay):
    """AsyncSamplesOptimizer: asynchronous sampling into a learner queue table."""
    from tfrl.optimizers.async_samples_optimizer import AsyncSamplesOptimizer

    return AsyncSamplesOptimizer(workers, config, replay)


ImpalaTrainer = build_trainer(
    "IMPALA",
    default_policy=VTraceTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
