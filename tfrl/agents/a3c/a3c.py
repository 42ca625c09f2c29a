"""A3C trainer: DEFAULT_CONFIG and A3CTrainer (asynchronous advantage actor-critic).

This is an algorithm's trainer declaration: the policy is A3CTFPolicy
(a3c_policy.py); the policy optimizer is AsyncGradientsOptimizer: each rollout worker computes
gradients on its own fragment, the driver applies them as they arrive and sends fresh weights
back to that worker. The synchronous variant is A2C (a2c.py).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.a3c.a3c_policy import A3CTFPolicy
from tfrl.agents.a3c.config import DEFAULT_CONFIG
from tfrl.errors import InvalidConfigError
from tfrl.trainer_template import build_trainer


def check_actor_critic_config(config: dict, algorithm: str) -> None:
    """Checks the actor-critic coefficients shared by A2C and A3C.

    Raises:
        InvalidConfigError: a negative entropy_coeff or vf_loss_coeff, lambda outside [0, 1],
            or a fragment length below 1.
    """
    if config["entropy_coeff"] < 0:
        raise InvalidConfigError(
            f"{algorithm}: entropy_coeff must be >= 0 (it weights an entropy bonus), got "
            f"{config['entropy_coeff']}.")
    if config["vf_loss_coeff"] < 0:
        raise InvalidConfigError(
            f"{algorithm}: vf_loss_coeff must be >= 0, got {config['vf_loss_coeff']}.")
    if not 0.0 <= config["lambda"] <= 1.0:
        raise InvalidConfigError(
            f"{algorithm}: lambda (GAE) must be in [0, 1], got {config['lambda']}.")
    if int(config["rollout_fragment_length"]) < 1:
        raise InvalidConfigError(
            f"{algorithm}: rollout_fragment_length must be >= 1, got "
            f"{config['rollout_fragment_length']}.")


def validate_config(config: dict) -> None:
    """A3C settings check.

    Raises:
        InvalidConfigError: see check_actor_critic_config; also grads_per_step < 1.
    """
    check_actor_critic_config(config, "A3C")
    if int(config["grads_per_step"]) < 1:
        raise InvalidConfigError(
            f"A3C: grads_per_step must be >= 1, got {config['grads_per_step']}.")


def make_policy_optimizer(workers, config, replay):
    """AsyncGradientsOptimizer (worker gradients applied by the driver as they arrive), or the
    strategy `optimizer` names: sharded_ps, allreduce or auto (tfrl/optimizers/selection.py)."""
    from tfrl.optimizers.selection import choose_policy_optimizer

    return choose_policy_optimizer(
        workers, config, replay, allowed=("async_gradients", "sharded_ps", "allreduce"),
        default="async_gradients", algorithm="A3C")


A3CTrainer = build_trainer(
    "A3C",
    default_policy=A3CTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
