"""DDPG trainer: DEFAULT_CONFIG and DDPGTrainer (TD3 is the same trainer with TD3_CONFIG, td3.py).

This is an algorithm's trainer declaration: the policy is DDPGTFPolicy (ddpg_policy.py); the
policy optimizer is SyncReplayOptimizer, exactly as for DQN: workers write n-step transitions
into a uniform or prioritized replay table on the replay server, the MirroredStrategy learner
samples train batches from it and |td_error| + eps goes back as priorities. Target networks
move by polyak `tau` inside the learner's step (tfrl/policy/actor_critic.py), so the trainer
only hard-syncs them once after the optimizer built its learner copy.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.ddpg.config import DEFAULT_CONFIG
from tfrl.agents.ddpg.ddpg_policy import DDPGTFPolicy, noise_scale_schedule
from tfrl.errors import InvalidConfigError
from tfrl.policy.actor_critic import validate_actor_critic_config
from tfrl.trainer import sync_target_networks
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """DDPG/TD3 settings check.

    Raises:
        InvalidConfigError: see `validate_actor_critic_config`; also a critic_loss other than
            "mse"/"huber", negative target noise, or bad exploration_config values.
    """
    validate_actor_critic_config("DDPG", config)
    if config["critic_loss"] not in ("mse", "huber"):
        raise InvalidConfigError(
            f"DDPG: critic_loss must be 'mse' or 'huber', got {config['critic_loss']!r}.")
    for key in ("target_noise", "target_noise_clip", "actor_lr", "critic_lr"):
        if float(config[key]) < 0:
            raise InvalidConfigError(f"DDPG: {key} must be >= 0, got {config[key]}.")
    noise_scale_schedule(config["exploration_config"])


def make_policy_optimizer(workers, config, replay):
    """SyncReplayOptimizer: uniform or prioritized replay, importance weights, priorities."""
    from tfrl.optimizers.sync_replay_optimizer import SyncReplayOptimizer

    return SyncReplayOptimizer(workers, config, replay)



DDPGTrainer = build_trainer(
    "DDPG",
    default_policy=DDPGTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
    after_init=sync_target_networks,
)
