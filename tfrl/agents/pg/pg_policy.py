"""PGTFPolicy: vanilla policy gradient (REINFORCE) declared with build_tf_policy.

This is an algorithm's policy (tfrl/agents/<algo>/): rollout workers call
`postprocess_pg_returns` (pg_postprocessing.py) on each trajectory fragment (discounted
returns-to-go, no critic, no bootstrap), and the learner minimises `pg_tf_loss`, the negative
mean of log pi(a|s) * return-to-go. The trainer is declared in pg.py.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import functools

import tensorflow as tf

from tfrl.agents.pg.config import DEFAULT_CONFIG
from tfrl.agents.pg.pg_postprocessing import postprocess_pg_returns
from tfrl.config import policy_defaults
from tfrl.policy import (LearningRateSchedule, Postprocessing, SampleBatch, build_tf_policy,
                         mean_over_valid_rows)


def pg_tf_loss(policy, model, dist_class, train_batch):
    """-mean(log pi(a|s) * return-to-go) over the batch (its real steps, for a recurrent
    model's padded sequences)."""
    mean = mean_over_valid_rows(train_batch)
    logits, _ = model.from_batch(train_batch)
    action_dist = dist_class(logits, model)
    log_likelihood = action_dist.logp(train_batch[SampleBatch.ACTIONS])
    policy.policy_loss = -mean(log_likelihood * train_batch[Postprocessing.ADVANTAGES])
    policy.policy_entropy = mean(action_dist.entropy())
    return policy.policy_loss


def pg_loss_stats(policy, train_batch):
    """The learning rate, and the policy loss and entropy where the loss set them: a loss that
    replaces pg_tf_loss (`PGTFPolicy.with_updates(loss_fn=...)`) need not, as classic RLlib's
    PG reported no stats."""
    stats = {name: getattr(policy, name) for name in ("policy_loss", "policy_entropy")
             if getattr(policy, name, None) is not None}
    stats["cur_lr"] = tf.cast(policy.optimizer.learning_rate, tf.float32)
    return stats


PGTFPolicy = build_tf_policy(
    "PGTFPolicy",
    loss_fn=pg_tf_loss,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    postprocess_fn=postprocess_pg_returns,
    stats_fn=pg_loss_stats,
    mixins=[LearningRateSchedule],
)
