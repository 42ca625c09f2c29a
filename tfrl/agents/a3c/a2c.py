"""A2C trainer: A2C_DEFAULT_CONFIG and A2CTrainer (synchronous advantage actor-critic).

This is an algorithm's trainer declaration: the policy is A3CTFPolicy
(a3c_policy.py), as in A3C, but the policy optimizer is SyncSamplesOptimizer: all workers'
fragments form one train batch, and the learner takes one gradient step on the whole batch
(sgd_minibatch_size = train_batch_size, num_sgd_iter = 1, unless set otherwise).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.a3c.a3c import check_actor_critic_config
from tfrl.agents.a3c.a3c_policy import A3CTFPolicy
from tfrl.agents.a3c.config import A2C_DEFAULT_CONFIG
from tfrl.optimizers.train_batch import fit_fragments_to_train_batch
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """A2C settings check.

    Raises:
        InvalidConfigError: bad actor-critic coefficients (see a3c.check_actor_critic_config)
            or inconsistent batch sizes (see optimizers.train_batch.fit_fragments_to_train_batch).
    """
    check_actor_critic_config(config, "A2C")
    fit_fragments_to_train_batch(config, "A2C")


def make_policy_optimizer(workers, config, replay):
    """SyncSamplesOptimizer: one learn step on each train batch of synchronous samples."""
    from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer

    return SyncSamplesOptimizer(workers, config, replay)


A2CTrainer = build_trainer(
    "A2C",
    default_policy=A3CTFPolicy,
    default_config=A2C_DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
