"""A3C trainer: DEFAULT_CONFIG and A3CTrainer (asynchronous advantage actor-critic).

This is an algorithm's trainer declaration: the policy is A3CTFPolicy
(a3c_policy.py); the policy optimizer is AsyncGradientsOptimizer: each rollout worker computes
gradients on its own fragment, the driver applies them as they arrive and sends fresh weights
back to that worker. The synchronous variant is A2C (a2c.py).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.a3c.a3c_policy import A3CTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.trainer import with_common_config
from tfrl.trainer_template import build_trainer

DEFAULT_CONFIG = with_common_config({
    # Critic and GAE: advantages are GAE(lambda) estimates bootstrapped from the value head.
    "use_critic": True,
    "use_gae": True,
    "lambda": 1.0,
    # Clip gradients to this global norm before applying them (None: no clipping).
    "grad_clip": 40.0,
    "lr": 0.0001,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
    # Weight of the value loss 0.5 * (V - target)^2 in the total loss.
    "vf_loss_coeff": 0.5,
    # Entropy bonus weight, and its optional [[timestep, coeff], ...] schedule.
    "entropy_coeff": 0.01,
    "entropy_coeff_schedule": None,
    # Short fragments: each is one gradient computed by a worker.
    "rollout_fragment_length": 10,
    # Gradients applied per optimizer step (one step = one call of optimizer.step()).
    "grads_per_step": 100,
    # An iteration lasts at least this long, so results are not reported too often.
    "min_iter_time_s": 5,
})


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
    """AsyncGradientsOptimizer: worker gradients applied by the driver as they arrive."""
    from tfrl.optimizers.async_gradients_optimizer import AsyncGradientsOptimizer

    return AsyncGradientsOptimizer(workers, config, replay)


A3CTrainer = build_trainer(
    "A3C",
    default_policy=A3CTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
