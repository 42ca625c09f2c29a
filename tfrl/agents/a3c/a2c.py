"""A2C trainer: A2C_DEFAULT_CONFIG and A2CTrainer (synchronous advantage actor-critic).

This is an algorithm's trainer declaration: the policy is A3CTFPolicy
(a3c_policy.py), as in A3C, but the policy optimizer is SyncSamplesOptimizer: all workers'
fragments form one train batch, and the learner takes one gradient step on the whole batch
(sgd_minibatch_size = train_batch_size, num_sgd_iter = 1, unless set otherwise).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.a3c.a3c import DEFAULT_CONFIG as A3C_CONFIG
from tfrl.agents.a3c.a3c import check_actor_critic_config
from tfrl.agents.a3c.a3c_policy import A3CTFPolicy
from tfrl.agents.pg.pg import fit_fragments_to_train_batch, make_policy_optimizer
from tfrl.config import merge_config
from tfrl.trainer_template import build_trainer

A2C_DEFAULT_CONFIG = merge_config(A3C_CONFIG, {
    "rollout_fragment_length": 20,
    # Env steps per learn step; a multiple of num_workers * num_envs_per_worker *
    # rollout_fragment_length (validate_config shortens fragments that are too long).
    "train_batch_size": 200,
    # None = the whole train batch as one minibatch; one pass (plain A2C).
    "sgd_minibatch_size": None,
    "num_sgd_iter": 1,
    "shuffle_sequences": True,
    "min_iter_time_s": 10,
}, allow_new_keys=True)
A2C_DEFAULT_CONFIG.pop("grads_per_step")  # an A3C (async optimizer) setting


def validate_config(config: dict) -> None:
    """A2C settings check.

    Raises:
        InvalidConfigError: bad actor-critic coefficients (see a3c.check_actor_critic_config)
            or inconsistent batch sizes (see pg.fit_fragments_to_train_batch).
    """
    check_actor_critic_config(config, "A2C")
    fit_fragments_to_train_batch(config, "A2C")


A2CTrainer = build_trainer(
    "A2C",
    default_policy=A3CTFPolicy,
    default_config=A2C_DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
