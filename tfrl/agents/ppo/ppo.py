"""PPO trainer: DEFAULT_CONFIG and PPOTrainer.

This is an algorithm's trainer declaration: the policy is PPOTFPolicy
(ppo_policy.py); the policy optimizer is LocalMultiDeviceOptimizer (minibatch SGD under
MirroredStrategy over all local devices, the batch loaded once for all epochs), or
SyncSamplesOptimizer with `simple_optimizer: True`. After every optimizer step `update_kl`
adapts the KL penalty coefficient to the KL the learner measured.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import logging

from tfrl.agents.ppo.config import DEFAULT_CONFIG
from tfrl.agents.ppo.ppo_policy import PPOTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.optimizers.train_batch import fit_fragments_to_train_batch
from tfrl.trainer import DEFAULT_POLICY_ID, learner_policies
from tfrl.trainer_template import build_trainer

logger = logging.getLogger(__name__)


def validate_config(config: dict) -> None:
    """PPO settings check (may shorten rollout_fragment_length, see
    optimizers.train_batch.fit_fragments_to_train_batch).

    Raises:
        InvalidConfigError: sgd_minibatch_size > train_batch_size, a train batch that is not a
            multiple of one sampling round, a negative entropy_coeff, kl_coeff or kl_target,
            clip_param <= 0 or vf_clip_param <= 0 (None turns value clipping off), a
            clip_param_schedule that is not [[timestep, value], ...], or lambda outside [0, 1].
    """
    fit_fragments_to_train_batch(config, "PPO")
    for key in ("entropy_coeff", "kl_coeff", "kl_target", "vf_loss_coeff"):
        if config[key] < 0:
            raise InvalidConfigError(f"PPO: {key} must be >= 0, got {config[key]}.")
    if config["clip_param"] <= 0:
        raise InvalidConfigError(f"PPO: clip_param must be > 0, got {config['clip_param']}.")
    if config["vf_clip_param"] is not None and config["vf_clip_param"] <= 0:
        raise InvalidConfigError(
            f"PPO: vf_clip_param must be > 0, got {config['vf_clip_param']}; set it to None to "
            "turn value clipping off.")
    schedule = config["clip_param_schedule"]
    if schedule is not None and not (
            isinstance(schedule, (list, tuple)) and schedule
            and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in schedule)):
        raise InvalidConfigError(
            f"PPO: clip_param_schedule must be [[timestep, clip], ...] or None, got {schedule!r}.")
    if not 0.0 <= config["lambda"] <= 1.0:
        raise InvalidConfigError(f"PPO: lambda (GAE) must be in [0, 1], got {config['lambda']}.")
    if config["use_gae"] and not config["use_critic"]:
        raise InvalidConfigError(
            "PPO: use_gae needs a critic; set use_critic True or use_gae False.")


def make_policy_optimizer(workers, config, replay):
    """LocalMultiDeviceOptimizer, or SyncSamplesOptimizer when `simple_optimizer` is set, or
    the strategy `optimizer` names: allreduce or auto (tfrl/optimizers/selection.py)."""
    from tfrl.optimizers.selection import choose_policy_optimizer

    default = "sync_samples" if config["simple_optimizer"] else "multi_device"
    return choose_policy_optimizer(
        workers, config, replay, allowed=("sync_samples", "multi_device", "allreduce"),
        default=default, algorithm="PPO", auto_candidates=(default, "allreduce"))


def update_kl(trainer, fetches):
    """Adapts each trained policy's KL coefficient to the mean KL its learner reported.

    `fetches` maps policy_id -> learner stats (a single policy's stats dict is accepted too).
    """
    if not fetches:
        return
    if "kl" in fetches:
        fetches = {DEFAULT_POLICY_ID: fetches}
    for pid, policy in learner_policies(trainer):
        stats = fetches.get(pid)
        if stats and "kl" in stats and hasattr(policy, "update_kl"):
            policy.update_kl(float(stats["kl"]))


def warn_about_value_scale(trainer, result):
    """Logs a hint when returns dwarf vf_clip_param (the value loss then barely trains)."""
    mean_return = result.get("episode_reward_mean")
    clip = trainer.config["vf_clip_param"]
    if clip is not None and trainer.config["use_critic"] and mean_return is not None and abs(mean_return) > 100 * clip:
        logger.warning("PPO: mean episode return %.1f is over 100x vf_clip_param %.1f; consider "
                       "raising vf_clip_param or scaling rewards", mean_return, clip)


PPOTrainer = build_trainer(
    "PPO",
    default_policy=PPOTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
    after_optimizer_step=update_kl,
    after_train_result=warn_about_value_scale,
)
