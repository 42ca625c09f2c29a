"""AsyncPPOTFPolicy: APPO, PPO's clipped surrogate on V-trace advantages (a with_updates of
VTraceTFPolicy).

This is an algorithm's policy. It learns on the same trajectory fragments as IMPALA
(impala_policy.py) and minimises

    ratio        = pi(a_s|x_s) / mu(a_s|x_s)            (mu: the behaviour policy's logits)
    A_s          = r_s + gamma v_{s+1} - V(x_s)           (v: V-trace targets, vtrace.py)
    policy_loss  = -mean(min(A_s * ratio, A_s * clip(ratio, 1 - clip_param, 1 + clip_param)))
    vf_loss      = 0.5 * mean((V(x_s) - v_s)^2)
    total_loss   = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * mean(entropy)

The importance weight that IMPALA's policy gradient multiplies in is the surrogate's ratio here,
clipped PPO's way, so several gradient steps (num_sgd_iter) on one batch stay close to mu.
"""
from __future__ import annotations

import functools

import tensorflow as tf

from tfrl.agents.impala.config import APPO_DEFAULT_CONFIG
from tfrl.agents.impala.impala_policy import FragmentOutputs, VTraceTFPolicy, vtrace_stats
from tfrl.config import policy_defaults
from tfrl.utils.tf_ops import explained_variance


def appo_surrogate_loss(policy, model, dist_class, train_batch):
    """The APPO loss of the module docstring; stores its parts on the policy for the stats."""
    out = FragmentOutputs(policy, model, dist_class, train_batch)
    clip = policy.config["clip_param"]
    ratio = tf.exp(out.log_rhos)
    advantages = out.vtrace.advantages
    surrogate = tf.minimum(advantages * ratio,
                           advantages * tf.clip_by_value(ratio, 1.0 - clip, 1.0 + clip))
    policy.policy_loss = -tf.reduce_mean(surrogate)
    policy.vf_loss = 0.5 * tf.reduce_mean(tf.square(out.values - out.vtrace.vs))
    policy.policy_entropy = out.entropy
    policy.mean_rho = tf.reduce_mean(ratio)
    policy.vf_explained_var = explained_variance(tf.reshape(out.vtrace.vs, [-1]),
                                                 tf.reshape(out.values, [-1]))
    policy.total_loss = (policy.policy_loss + policy.config["vf_loss_coeff"] * policy.vf_loss
                         - policy.entropy_coeff * policy.policy_entropy)
    return policy.total_loss


AsyncPPOTFPolicy = VTraceTFPolicy.with_updates(
    name="AsyncPPOTFPolicy",
    loss_fn=appo_surrogate_loss,
    get_default_config=functools.partial(policy_defaults, APPO_DEFAULT_CONFIG),
    stats_fn=vtrace_stats,
)
