"""PPOTFPolicy: proximal policy optimisation declared with build_tf_policy.

This is an algorithm's policy. Rollout workers record the behaviour
policy's distribution inputs, log-probabilities and value predictions with every action, and
`compute_gae_for_sample_batch` adds GAE advantages and value targets. The learner minimises
`ppo_surrogate_loss` on minibatches:

    ratio        = exp(logp_new(a) - logp_old(a))
    surrogate    = mean(min(A * ratio, A * clip(ratio, 1 - clip_param, 1 + clip_param)))
    vf_loss      = mean(max((V - target)^2,
                            (V_old + clip(V - V_old, -vf_clip_param, vf_clip_param) - target)^2))
    total_loss   = -surrogate + kl_coeff * mean(KL(old || new)) + vf_loss_coeff * vf_loss
                   - entropy_coeff * mean(entropy)

With `standardize_advantages` the advantages A of each (per-replica) minibatch are shifted to
mean 0 and scaled to standard deviation 1 first. With a recurrent model every mean (and the
standardisation) runs over the real steps only, never over the padding of the sequences.
`kl_coeff` adapts after every optimizer step (KLCoeffMixin.update_kl, driven by the trainer's
after_optimizer_step hook); learning rate and entropy coefficient follow their schedules.

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import functools
from typing import Dict, NamedTuple

import tensorflow as tf

from tfrl.agents.ppo.config import DEFAULT_CONFIG
from tfrl.config import policy_defaults
from tfrl.policy import (EntropyCoeffSchedule, KLCoeffMixin, LearningRateSchedule,
                         Postprocessing, SampleBatch, ValueNetworkMixin, build_tf_policy,
                         compute_gae_for_sample_batch, mean_over_valid_rows)
from tfrl.policy.mixins import setup_scheduled_coefficient, update_scheduled_coefficient
from tfrl.utils.tf_ops import explained_variance


def standardized(values, mean_fn=tf.reduce_mean):
    """(values - mean) / std, the moments taken with `mean_fn` (e.g. over real rows only)."""
    mean = mean_fn(values)
    variance = mean_fn(tf.square(values - mean))
    return (values - mean) / (tf.sqrt(variance) + 1e-8)


def ppo_surrogate_loss(policy, model, dist_class, train_batch):
    """The PPO loss of the module docstring; stores its parts on the policy for the stats."""
    config = policy.config
    mean = mean_over_valid_rows(train_batch)
    logits, _ = model.from_batch(train_batch)
    curr_dist = dist_class(logits, model)
    prev_dist = dist_class(train_batch[SampleBatch.ACTION_DIST_INPUTS], model)
    actions = train_batch[SampleBatch.ACTIONS]
    advantages = train_batch[Postprocessing.ADVANTAGES]
    if config["standardize_advantages"]:
        advantages = standardized(advantages, mean)

    logp_ratio = tf.exp(curr_dist.logp(actions) - train_batch[SampleBatch.ACTION_LOGP])
    # a policy declared without ClipParamSchedule / EntropyCoeffSchedule (a classic PPO
    # declaration lists only LearningRateSchedule, KLCoeffMixin and ValueNetworkMixin) uses the
    # constant config values
    clip = getattr(policy, "clip_param", config["clip_param"])
    entropy_coeff = getattr(policy, "entropy_coeff", config["entropy_coeff"])
    surrogate = tf.minimum(advantages * logp_ratio,
                           advantages * tf.clip_by_value(logp_ratio, 1.0 - clip, 1.0 + clip))
    policy.mean_policy_loss = -mean(surrogate)
    policy.mean_kl = mean(prev_dist.kl(curr_dist))
    policy.mean_entropy = mean(curr_dist.entropy())

    total = (policy.mean_policy_loss + policy.kl_coeff * policy.mean_kl
             - entropy_coeff * policy.mean_entropy)
    if config["use_critic"]:
        values = model.value_function()
        targets = train_batch[Postprocessing.VALUE_TARGETS]
        previous_values = train_batch[SampleBatch.VF_PREDS]
        unclipped = tf.square(values - targets)
        vf_clip = config["vf_clip_param"]
        if vf_clip is None:
            policy.mean_vf_loss = mean(unclipped)
        else:
            clipped_values = previous_values + tf.clip_by_value(values - previous_values,
                                                                -vf_clip, vf_clip)
            clipped = tf.square(clipped_values - targets)
            policy.mean_vf_loss = mean(tf.maximum(unclipped, clipped))
        policy.vf_explained_var = explained_variance(targets, values)
        total += config["vf_loss_coeff"] * policy.mean_vf_loss
    else:
        policy.mean_vf_loss = tf.constant(0.0)
        policy.vf_explained_var = tf.constant(0.0)
    policy.total_loss = total
    # classic RLlib's PPOLoss object, which classic stats functions read
    policy.loss_obj = PPOLossParts(loss=total, mean_policy_loss=policy.mean_policy_loss,
                                   mean_vf_loss=policy.mean_vf_loss, mean_kl=policy.mean_kl,
                                   mean_entropy=policy.mean_entropy)
    return total


class PPOLossParts(NamedTuple):
    """The parts of the PPO loss under classic RLlib's `policy.loss_obj` names."""

    loss: tf.Tensor
    mean_policy_loss: tf.Tensor
    mean_vf_loss: tf.Tensor
    mean_kl: tf.Tensor
    mean_entropy: tf.Tensor


class ClipParamSchedule:
    """`policy.clip_param` (a non-trainable tf.Variable the loss reads) follows config
    `clip_param_schedule` ([[t, clip], ...]) or stays at `clip_param`."""

    def _setup_mixin(self):
        setup_scheduled_coefficient(self, "clip_param", self.config["clip_param"],
                                    self.config.get("clip_param_schedule"))

    def on_global_var_update(self, global_vars: Dict) -> None:
        super().on_global_var_update(global_vars)
        update_scheduled_coefficient(self, "clip_param")


def kl_and_loss_stats(policy, train_batch):
    # read through policy.loss_obj, so a variant whose loss sets only that (a classic loss
    # function building PPOLoss) reports the same stats
    parts = policy.loss_obj
    explained = getattr(policy, "vf_explained_var", None)
    if explained is None:
        explained = explained_variance(train_batch[Postprocessing.VALUE_TARGETS],
                                       policy.model.value_function())
    return {
        "total_loss": parts.loss,
        "policy_loss": parts.mean_policy_loss,
        "vf_loss": parts.mean_vf_loss,
        "vf_explained_var": explained,
        "kl": parts.mean_kl,
        "entropy": parts.mean_entropy,
        "entropy_coeff": tf.identity(getattr(policy, "entropy_coeff",
                                             policy.config["entropy_coeff"])),
        "cur_kl_coeff": tf.identity(policy.kl_coeff),
        "clip_param": tf.identity(getattr(policy, "clip_param", policy.config["clip_param"])),
        "cur_lr": tf.cast(policy.optimizer.learning_rate, tf.float32),
    }


PPOTFPolicy = build_tf_policy(
    "PPOTFPolicy",
    loss_fn=ppo_surrogate_loss,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    postprocess_fn=compute_gae_for_sample_batch,
    stats_fn=kl_and_loss_stats,
    mixins=[ValueNetworkMixin, LearningRateSchedule, EntropyCoeffSchedule, KLCoeffMixin,
            ClipParamSchedule],
)
