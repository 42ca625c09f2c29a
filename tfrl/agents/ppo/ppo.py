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

from tfrl.agents.pg.pg import fit_fragments_to_train_batch
from tfrl.agents.ppo.ppo_policy import PPOTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.trainer import DEFAULT_POLICY_ID, with_common_config
from tfrl.trainer_template import build_trainer

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = with_common_config({
    # Critic and GAE: advantages are GAE(lambda) estimates bootstrapped from the value head.
    "use_critic": True,
    "use_gae": True,
    "lambda": 1.0,
    # Initial KL penalty coefficient and the KL it adapts towards (0 disables the penalty).
    "kl_coeff": 0.2,
    "kl_target": 0.01,
    # Env steps per fragment written by each env of a worker.
    "rollout_fragment_length": 200,
    # Env steps per optimizer step; a multiple of num_workers * num_envs_per_worker *
    # rollout_fragment_length (validate_config shortens fragments that are too long).
    "train_batch_size": 4000,
    # Minibatch size and number of epochs over each train batch.
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 30,
    # Shuffle rows (sequences for recurrent models) between epochs.
    "shuffle_sequences": True,
    # Standardize the advantages of each minibatch (mean 0, std 1) inside the loss.
    "standardize_advantages": True,
    "lr": 5e-5,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
    # Weight of the (clipped) value loss.
    "vf_loss_coeff": 1.0,
    # Entropy bonus weight, and its optional [[timestep, coeff], ...] schedule.
    "entropy_coeff": 0.0,
    "entropy_coeff_schedule": None,
    # Surrogate clip range: the probability ratio is clipped to [1 - c, 1 + c].
    "clip_param": 0.3,
    # Value predictions move at most this far from the behaviour policy's predictions. It is
    # in reward units: scale it with the returns of the env.
    "vf_clip_param": 10.0,
    # Clip gradients to this global norm (None: no clipping).
    "grad_clip": None,
    # True: SyncSamplesOptimizer (single device); False: LocalMultiDeviceOptimizer.
    "simple_optimizer": False,
})


def validate_config(config: dict) -> None:
    """PPO settings check (may shorten rollout_fragment_length, see
    pg.fit_fragments_to_train_batch).

    Raises:
        InvalidConfigError: sgd_minibatch_size > train_batch_size, a train batch that is not a
            multiple of one sampling round, a negative entropy_coeff, kl_coeff or kl_target,
            clip_param <= 0 or vf_clip_param <= 0, or lambda outside [0, 1].
    """
    fit_fragments_to_train_batch(config, "PPO")
    for key in ("entropy_coeff", "kl_coeff", "kl_target", "vf_loss_coeff"):
        if config[key] < 0:
            raise InvalidConfigError(f"PPO: {key} must be >= 0, got {config[key]}.")
    for key in ("clip_param", "vf_clip_param"):
        if config[key] <= 0:
            raise InvalidConfigError(
                f"PPO: {key} must be > 0, got {config[key]}; use a large value to turn "
                "clipping off.")
    if not 0.0 <= config["lambda"] <= 1.0:
        raise InvalidConfigError(f"PPO: lambda (GAE) must be in [0, 1], got {config['lambda']}.")
    if config["use_gae"] and not config["use_critic"]:
        raise InvalidConfigError(
            "PPO: use_gae needs a critic; set use_critic True or use_gae False.")


def make_policy_optimizer(workers, config, replay):
    """LocalMultiDeviceOptimizer, or SyncSamplesOptimizer when `simple_optimizer` is set."""
    if config["simple_optimizer"]:
        from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer

        return SyncSamplesOptimizer(workers, config, replay)
    from tfrl.optimizers.multi_device_optimizer import LocalMultiDeviceOptimizer

    return LocalMultiDeviceOptimizer(workers, config, replay)


def learner_policies(trainer):
    """(policy_id, policy) pairs of every policy copy whose loss learns: the local worker's,
    plus any copies the optimizer keeps on its devices (`optimizer.learner_policies()`)."""
    worker = trainer.workers.local_worker()
    pairs = [(pid, worker.get_policy(pid)) for pid in worker.policies_to_train]
    own = getattr(trainer.optimizer, "learner_policies", None)
    if callable(own):
        pairs += [pair for pair in own().items() if all(pair[1] is not p for _, p in pairs)]
    return pairs


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
    if trainer.config["use_critic"] and mean_return is not None and abs(mean_return) > 100 * clip:
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
