"""MARWILTFPolicy: monotonic advantage re-weighted imitation learning (Wang et al. 2018).

This is an algorithm's policy (tfrl/agents/<algo>/), usually trained on recorded experience
(`input`, tfrl/offline/). `postprocess_marwil_returns` adds the discounted returns (bootstrapped
from the value function where an episode piece does not end) under `advantages`; the loss
imitates the recorded actions, each weighted by exp(beta * (R - V(s)) / c), where c is the root
of a running mean of squared advantages, and fits V(s) to R. With beta = 0 the weights are all
1 and the loss is plain behaviour cloning (BC), which trains no value function.
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from tfrl.agents.marwil.config import DEFAULT_CONFIG
from tfrl.config import policy_defaults
from tfrl.policy import (LearningRateSchedule, Postprocessing, SampleBatch, ValueNetworkMixin,
                         build_tf_policy, compute_advantages, concat_samples,
                         mean_over_valid_rows)


def postprocess_marwil_returns(policy, sample_batch, other_agent_batches=None, episode=None):
    """Adds `advantages` = discounted returns-to-go of every episode piece; a piece that does
    not end in a terminal state is bootstrapped with the value of its last next observation.

    Raises:
        InvalidBatchError: if the batch has no `rewards` column.
    """
    split = SampleBatch.EPS_ID in sample_batch
    pieces = sample_batch.split_by_episode() if split else [sample_batch]
    out = []
    for piece in pieces:
        if not piece.count:
            continue
        terminated = bool(np.asarray(piece[SampleBatch.TERMINATEDS])[-1]) \
            if SampleBatch.TERMINATEDS in piece else False
        last_r = 0.0
        if not terminated and policy.model.has_value_branch:
            last_r = float(policy.value(np.asarray(piece[SampleBatch.NEXT_OBS])[-1:])[0])
        out.append(compute_advantages(piece.copy(), last_r, policy.config["gamma"],
                                      use_gae=False, use_critic=False))
    return concat_samples(out)


class MovingAverageAdvantageNorm:
    """`policy.ma_adv_norm`: the running mean of squared advantages (a non-trainable variable,
    part of the policy state), started at config `moving_average_sqd_adv_norm_start`."""

    def _setup_mixin(self):
        self.ma_adv_norm = tf.Variable(
            float(self.config["moving_average_sqd_adv_norm_start"]), trainable=False,
            dtype=tf.float32, name="moving_average_sqd_adv_norm",
            aggregation=tf.VariableAggregation.MEAN)
        self._extra_state_variables["ma_adv_norm"] = [self.ma_adv_norm]


def marwil_loss(policy, model, dist_class, train_batch):
    """-mean(w * log pi(a|s)) + vf_coeff * 0.5 * mean((R - V(s))^2), w as in the module
    docstring (w = 1 and no value loss with beta = 0)."""
    config = policy.config
    mean = mean_over_valid_rows(train_batch)
    logits, _ = model.from_batch(train_batch)
    action_dist = dist_class(logits, model)
    logp = action_dist.logp(train_batch[SampleBatch.ACTIONS])
    returns = train_batch[Postprocessing.ADVANTAGES]
    beta = float(config["beta"])
    if beta != 0.0:
        values = model.value_function()
        advantages = returns - values
        rate = float(config["moving_average_sqd_adv_norm_update_rate"])
        policy.ma_adv_norm.assign_add(
            rate * (mean(tf.square(tf.stop_gradient(advantages))) - policy.ma_adv_norm))
        weights = tf.exp(beta * tf.stop_gradient(advantages)
                         / (1e-8 + tf.sqrt(policy.ma_adv_norm)))
        policy.vf_loss = 0.5 * mean(tf.square(advantages))
    else:
        weights = tf.ones_like(logp)
        policy.vf_loss = tf.constant(0.0)
    policy.policy_loss = -mean(tf.stop_gradient(weights) * logp)
    policy.total_loss = policy.policy_loss + float(config["vf_coeff"]) * policy.vf_loss
    return policy.total_loss


def marwil_loss_stats(policy, train_batch):
    return {"policy_loss": policy.policy_loss, "vf_loss": policy.vf_loss,
            "total_loss": policy.total_loss,
            "moving_average_sqd_adv_norm": tf.identity(policy.ma_adv_norm),
            "cur_lr": tf.cast(policy.optimizer.learning_rate, tf.float32)}


MARWILTFPolicy = build_tf_policy(
    "MARWILTFPolicy",
    loss_fn=marwil_loss,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    postprocess_fn=postprocess_marwil_returns,
    stats_fn=marwil_loss_stats,
    mixins=[ValueNetworkMixin, LearningRateSchedule, MovingAverageAdvantageNorm],
)
