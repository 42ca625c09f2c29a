"""DQN trainer: DEFAULT_CONFIG and DQNTrainer.

This is an algorithm's trainer declaration: the policy is DQNTFPolicy
(dqn_policy.py); the policy optimizer is SyncReplayOptimizer: workers write n-step transitions
into a uniform or prioritized replay table, the learner samples train batches from it (with
importance weights in the `weights` column when prioritized) and returns |td_error| + eps as new
priorities. After every optimizer step `update_target_and_exploration` refreshes the target
network every `target_network_update_freq` sampled steps and then sends the global timestep to
every worker, which moves their epsilon schedules.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.dqn.config import DEFAULT_CONFIG
from tfrl.agents.dqn.dqn_policy import DQNTFPolicy, epsilon_schedule_from_config
from tfrl.errors import InvalidConfigError
from tfrl.trainer import learner_policies, sync_target_networks
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """DQN settings check.

    Raises:
        InvalidConfigError: n_step, target_network_update_freq, train_batch_size or
            rollout_fragment_length below 1; buffer_size below train_batch_size; negative
            learning_starts; a replay exponent, beta or tau out of range; a non-positive
            training_intensity or broadcast_interval; bad exploration_config values; a
            td_error_loss_fn other than "huber" or "mse"; a non-positive adam_epsilon;
            q_target_bounds that are not two numbers [low, high] with low < high.
    """
    for key in ("n_step", "target_network_update_freq", "train_batch_size",
                "rollout_fragment_length", "broadcast_interval"):
        if int(config[key]) < 1:
            raise InvalidConfigError(f"DQN: {key} must be >= 1, got {config[key]}.")
    if int(config["buffer_size"]) < int(config["train_batch_size"]):
        raise InvalidConfigError(
            f"DQN: buffer_size ({config['buffer_size']}) must be at least train_batch_size "
            f"({config['train_batch_size']}).")
    if config["td_error_loss_fn"] not in ("huber", "mse"):
        raise InvalidConfigError(
            f"DQN: td_error_loss_fn must be 'huber' or 'mse', got {config['td_error_loss_fn']!r}.")
    bounds = config["q_target_bounds"]
    if bounds is not None and not (isinstance(bounds, (list, tuple)) and len(bounds) == 2
                                   and all(isinstance(b, (int, float)) for b in bounds)
                                   and bounds[0] < bounds[1]):
        raise InvalidConfigError(
            f"DQN: q_target_bounds must be None or [low, high] with low < high, got {bounds}.")
    if not config["adam_epsilon"] > 0:
        raise InvalidConfigError(f"DQN: adam_epsilon must be > 0, got {config['adam_epsilon']}.")
    if int(config["learning_starts"]) < 0:
        raise InvalidConfigError(
            f"DQN: learning_starts must be >= 0, got {config['learning_starts']}.")
    if config["prioritized_replay_alpha"] < 0:
        raise InvalidConfigError(
            "DQN: prioritized_replay_alpha must be >= 0, got "
            f"{config['prioritized_replay_alpha']}.")
    for key in ("prioritized_replay_beta", "final_prioritized_replay_beta", "tau"):
        if not 0.0 <= config[key] <= 1.0:
            raise InvalidConfigError(f"DQN: {key} must be in [0, 1], got {config[key]}.")
    if config["prioritized_replay_eps"] <= 0:
        raise InvalidConfigError(
            "DQN: prioritized_replay_eps must be > 0 (it keeps every priority positive), got "
            f"{config['prioritized_replay_eps']}.")
    if config["training_intensity"] is not None and config["training_intensity"] <= 0:
        raise InvalidConfigError(
            f"DQN: training_intensity must be > 0 or None, got {config['training_intensity']}.")
    epsilon_schedule_from_config(config["exploration_config"])


def make_policy_optimizer(workers, config, replay):
    """SyncReplayOptimizer: uniform or prioritized replay, importance weights, priorities."""
    from tfrl.optimizers.sync_replay_optimizer import SyncReplayOptimizer

    return SyncReplayOptimizer(workers, config, replay)



def update_target_and_exploration(trainer, fetches):
    """Every target_network_update_freq sampled steps: hard (or tau) target update of every
    learning policy copy, then the global timestep goes to all workers (epsilon, schedules).

    The remote workers get it without waiting: they may be sampling the next round, and each
    actor runs its calls in order (a worker that died is recreated by the next sampling round).
    """
    sampled = trainer.optimizer.num_steps_sampled
    last = getattr(trainer, "last_target_update_step", 0)
    if sampled - last < trainer.config["target_network_update_freq"]:
        return
    for _, policy in learner_policies(trainer):
        policy.update_target()
    trainer.last_target_update_step = sampled
    global_vars = {"timestep": sampled}
    trainer.workers.local_worker().set_global_vars(global_vars)
    for worker in trainer.workers.remote_workers():
        worker.set_global_vars.remote(global_vars)


DQNTrainer = build_trainer(
    "DQN",
    default_policy=DQNTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
    after_init=sync_target_networks,
    after_optimizer_step=update_target_and_exploration,
)
