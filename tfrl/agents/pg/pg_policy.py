"""PGTFPolicy: vanilla policy gradient (REINFORCE) declared with build_tf_policy.

This is an algorithm's policy (tfrl/agents/<algo>/): rollout workers call
`postprocess_pg_returns` on each trajectory fragment (discounted returns-to-go, no critic, no
bootstrap), and the learner minimises `pg_tf_loss`, the negative mean of
log pi(a|s) * return-to-go. The trainer is declared in pg.py.
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import copy

import tensorflow as tf

from tfrl.policy import (LearningRateSchedule, Postprocessing, SampleBatch, build_tf_policy,
                         compute_advantages, concat_samples, mean_over_valid_rows)


def pg_default_config() -> dict:
    """The policy-level defaults: PG's trainer DEFAULT_CONFIG without the model section (the
    ModelCatalog supplies model defaults)."""
    from tfrl.agents.pg.pg import DEFAULT_CONFIG

    config = copy.deepcopy(DEFAULT_CONFIG)
    config.pop("model", None)
    return config


def postprocess_pg_returns(policy, sample_batch, other_agent_batches=None, episode=None):
    """Adds `advantages` = discounted returns-to-go (gamma = config["gamma"]) per episode piece.

    Without a critic there is nothing to bootstrap from, so a fragment cut mid-episode sums only
    the rewards it holds (use batch_mode "complete_episodes" for unbiased returns).

    Raises:
        InvalidBatchError: if the batch has no `rewards` column.
    """
    split = SampleBatch.EPS_ID in sample_batch or SampleBatch.TERMINATEDS in sample_batch
    pieces = sample_batch.split_by_episode() if split else [sample_batch]
    gamma = policy.config.get("gamma", 0.99)
    return concat_samples([compute_advantages(piece.copy(), 0.0, gamma, use_gae=False,
                                              use_critic=False) for piece in pieces])


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
    return {"policy_loss": policy.policy_loss, "policy_entropy": policy.policy_entropy,
            "cur_lr": tf.cast(policy.optimizer.learning_rate, tf.float32)}


PGTFPolicy = build_tf_policy(
    "PGTFPolicy",
    loss_fn=pg_tf_loss,
    get_default_config=pg_default_config,
    postprocess_fn=postprocess_pg_returns,
    stats_fn=pg_loss_stats,
    mixins=[LearningRateSchedule],
)
