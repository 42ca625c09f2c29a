"""SAC trainer: DEFAULT_CONFIG and SACTrainer.

This is an algorithm's trainer declaration: the policy is SACTFPolicy (sac_policy.py); the
policy optimizer is SyncReplayOptimizer, exactly as for DQN: workers write n-step transitions
into a uniform or prioritized replay table on the replay server, the MirroredStrategy learner
samples train batches from it and |td_error| + eps goes back as priorities. The target critics
move by polyak `tau` inside the learner's step (tfrl/policy/actor_critic.py), so the trainer
only hard-syncs them once after the optimizer built its learner copy.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.sac.config import DEFAULT_CONFIG
from tfrl.agents.sac.sac_policy import SACTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.policy.actor_critic import validate_actor_critic_config
from tfrl.trainer import sync_target_networks
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """SAC settings check.

    Raises:
        InvalidConfigError: see `validate_actor_critic_config`; also a non-positive
            initial_alpha or learning rate, a negative random_timesteps, or a target_entropy
            that is neither "auto" nor a number.
    """
    validate_actor_critic_config("SAC", config)
    if float(config["initial_alpha"]) <= 0:
        raise InvalidConfigError(f"SAC: initial_alpha must be > 0, got {config['initial_alpha']}.")
    for key, rate in config["optimization"].items():
        if float(rate) <= 0:
            raise InvalidConfigError(f"SAC: optimization {key} must be > 0, got {rate}.")
    if int(config["exploration_config"]["random_timesteps"]) < 0:
        raise InvalidConfigError("SAC: exploration_config random_timesteps must be >= 0, got "
                                 f"{config['exploration_config']['random_timesteps']}.")
    target = config["target_entropy"]
    if target not in ("auto", None) and not isinstance(target, (int, float)):
        raise InvalidConfigError(f"SAC: target_entropy must be 'auto' or a number, got {target!r}.")


def make_policy_optimizer(workers, config, replay):
    """SyncReplayOptimizer: uniform or prioritized replay, importance weights, priorities."""
    from tfrl.optimizers.sync_replay_optimizer import SyncReplayOptimizer

    return SyncReplayOptimizer(workers, config, replay)



SACTrainer = build_trainer(
    "SAC",
    default_policy=SACTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
    after_init=sync_target_networks,
)
