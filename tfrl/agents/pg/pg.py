"""PG trainer: DEFAULT_CONFIG and PGTrainer (vanilla policy gradient, synchronous sampling).

This is an algorithm's trainer declaration: the policy is PGTFPolicy
(pg_policy.py); the policy optimizer is SyncSamplesOptimizer (workers write postprocessed
fragments into a queue table, the learner takes one step on each train batch).
`fit_fragments_to_train_batch` is shared with the other on-policy trainers (A2C, PPO).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import logging

from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.errors import InvalidConfigError
from tfrl.trainer import with_common_config
from tfrl.trainer_template import build_trainer

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = with_common_config({
    # Env steps per fragment written by each env of a worker.
    "rollout_fragment_length": 200,
    # Env steps per learn step; a multiple of num_workers * num_envs_per_worker *
    # rollout_fragment_length (validate_config shortens fragments that are too long).
    "train_batch_size": 200,
    # Minibatch and epochs of the sync optimizer: None = the whole train batch, one pass.
    "sgd_minibatch_size": None,
    "num_sgd_iter": 1,
    "shuffle_sequences": True,
    "lr": 0.0004,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
})


def fit_fragments_to_train_batch(config: dict, algorithm: str) -> None:
    """Makes one sampling round fill a train batch exactly (edits `config` in place).

    One round yields max(num_workers, 1) * num_envs_per_worker * rollout_fragment_length steps.
    If that is more than train_batch_size the fragment is shortened; then train_batch_size must
    be a multiple of the round. Episodes of random length make this moot in batch_mode
    "complete_episodes", which is not checked. Also fills sgd_minibatch_size None with
    train_batch_size.

    Raises:
        InvalidConfigError: train_batch_size or sgd_minibatch_size is not positive, the
            minibatch is larger than the train batch, or the train batch is not a multiple of
            one sampling round.
    """
    train_batch = int(config["train_batch_size"])
    if train_batch < 1:
        raise InvalidConfigError(f"{algorithm}: train_batch_size must be >= 1, got {train_batch}.")
    if config.get("sgd_minibatch_size") is None:
        config["sgd_minibatch_size"] = train_batch
    minibatch = int(config["sgd_minibatch_size"])
    if not 1 <= minibatch <= train_batch:
        raise InvalidConfigError(
            f"{algorithm}: sgd_minibatch_size ({minibatch}) must be between 1 and "
            f"train_batch_size ({train_batch}); lower sgd_minibatch_size or raise "
            "train_batch_size.")
    if int(config.get("num_sgd_iter", 1)) < 1:
        raise InvalidConfigError(
            f"{algorithm}: num_sgd_iter must be >= 1, got {config.get('num_sgd_iter')}.")
    if config.get("batch_mode") == "complete_episodes":
        return
    envs = max(int(config.get("num_workers", 0)), 1) * int(config.get("num_envs_per_worker", 1))
    fragment = int(config["rollout_fragment_length"])
    if envs * fragment > train_batch:
        shorter = max(train_batch // envs, 1)
        logger.info("%s: rollout_fragment_length %d -> %d so that one sampling round of %d envs "
                    "fits train_batch_size %d", algorithm, fragment, shorter, envs, train_batch)
        config["rollout_fragment_length"] = fragment = shorter
    round_steps = envs * fragment
    if train_batch % round_steps:
        raise InvalidConfigError(
            f"{algorithm}: train_batch_size {train_batch} is not a multiple of one sampling "
            f"round ({envs} envs x rollout_fragment_length {fragment} = {round_steps} "
            f"steps); use train_batch_size {(train_batch // round_steps + 1) * round_steps} or "
            "change num_workers, num_envs_per_worker or rollout_fragment_length.")


def validate_config(config: dict) -> None:
    """PG settings check; see fit_fragments_to_train_batch.

    Raises:
        InvalidConfigError: on inconsistent batch sizes.
    """
    fit_fragments_to_train_batch(config, "PG")


def make_policy_optimizer(workers, config, replay):
    """SyncSamplesOptimizer: one learn step on each train batch of synchronous samples."""
    from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer

    return SyncSamplesOptimizer(workers, config, replay)


PGTrainer = build_trainer(
    "PG",
    default_policy=PGTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
