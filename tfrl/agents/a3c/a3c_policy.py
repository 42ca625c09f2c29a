"""A3CTFPolicy: advantage actor-critic (used by both A3C and A2C) declared with build_tf_policy.

This is an algorithm's policy: rollout workers add GAE advantages and value
targets (`compute_gae_for_sample_batch`, bootstrapping cut fragments from the critic); the
learner minimises `actor_critic_loss`:

    policy_loss  = -mean(log pi(a|s) * advantage)
    vf_loss      = 0.5 * mean((V(s) - value_target)^2)
    total_loss   = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * mean(entropy)

Gradients are clipped by global norm `grad_clip`. The entropy coefficient and learning rate
follow their schedules (EntropyCoeffSchedule, LearningRateSchedule). Whether gradients are
applied asynchronously (A3C) or on synchronous batches (A2C) is the trainer's choice.

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import copy

import tensorflow as tf

from tfrl.policy import (EntropyCoeffSchedule, LearningRateSchedule, Postprocessing,
                         SampleBatch, ValueNetworkMixin, build_tf_policy,
                         compute_gae_for_sample_batch, mean_over_valid_rows)


def a3c_default_config() -> dict:
    """A3C's trainer DEFAULT_CONFIG without the model section (the catalog supplies it)."""
    from tfrl.agents.a3c.a3c import DEFAULT_CONFIG

    config = copy.deepcopy(DEFAULT_CONFIG)
    config.pop("model", None)
    return config


def explained_variance(targets, predictions):
    """1 - Var[targets - predictions] / Var[targets], floored at -1."""
    _, target_var = tf.nn.moments(targets, axes=[0])
    _, diff_var = tf.nn.moments(targets - predictions, axes=[0])
    return tf.maximum(-1.0, 1.0 - diff_var / (target_var + 1e-8))


def actor_critic_loss(policy, model, dist_class, train_batch):
    """The A2C/A3C loss (module docstring; means over real steps only, never over the padding
    of recurrent sequences); stores its parts on the policy for the stats."""
    mean = mean_over_valid_rows(train_batch)
    logits, _ = model.from_batch(train_batch)
    values = model.value_function()
    action_dist = dist_class(logits, model)
    log_prob = action_dist.logp(train_batch[SampleBatch.ACTIONS])
    policy.policy_loss = -mean(log_prob * train_batch[Postprocessing.ADVANTAGES])
    policy.vf_loss = 0.5 * mean(tf.square(values - train_batch[Postprocessing.VALUE_TARGETS]))
    policy.policy_entropy = mean(action_dist.entropy())
    policy.vf_explained_var = explained_variance(train_batch[Postprocessing.VALUE_TARGETS],
                                                 values)
    return (policy.policy_loss + policy.config["vf_loss_coeff"] * policy.vf_loss
            - policy.entropy_coeff * policy.policy_entropy)


def actor_critic_stats(policy, train_batch):
    return {
        "policy_loss": policy.policy_loss,
        "vf_loss": policy.vf_loss,
        "policy_entropy": policy.policy_entropy,
        "vf_explained_var": policy.vf_explained_var,
        "entropy_coeff": tf.identity(policy.entropy_coeff),
        "cur_lr": tf.cast(policy.optimizer.learning_rate, tf.float32),
        "var_gnorm": tf.linalg.global_norm(policy.model.trainable_variables),
    }


A3CTFPolicy = build_tf_policy(
    "A3CTFPolicy",
    loss_fn=actor_critic_loss,
    get_default_config=a3c_default_config,
    postprocess_fn=compute_gae_for_sample_batch,
    stats_fn=actor_critic_stats,
    mixins=[ValueNetworkMixin, LearningRateSchedule, EntropyCoeffSchedule],
)
