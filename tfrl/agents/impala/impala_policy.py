"""VTraceTFPolicy: IMPALA's actor-critic with V-trace off-policy correction (build_tf_policy).

This is an algorithm's policy. Rollout workers record the behaviour policy's distribution inputs
(`action_dist_inputs`, the logits mu) with every action; the learner receives whole trajectory
fragments of `rollout_fragment_length` steps of one env (replay items, see
tfrl/rollout/replay_output.py), flattened batch-major into rows. The loss puts them back in time
order, evaluates the current policy pi and value function on every observation and next
observation, and minimises

    policy_loss  = -mean(log pi(a_s|x_s) * rho_pg_s (r_s + gamma v_{s+1} - V(x_s)))
    vf_loss      = 0.5 * mean((V(x_s) - v_s)^2)
    total_loss   = policy_loss + vf_loss_coeff * vf_loss - entropy_coeff * mean(entropy)

with v_s the V-trace targets of vtrace.py. Episode boundaries inside a fragment cut the traces;
a terminated episode bootstraps from 0, a truncated one from V of its last observation, and the
fragment's last step from V of its next observation. Needs no postprocessing on the workers.

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import functools

import tensorflow as tf
import tf_keras as keras
import tree

from tfrl.agents.impala.config import DEFAULT_CONFIG
from tfrl.agents.impala.vtrace import vtrace_returns
from tfrl.config import policy_defaults
from tfrl.policy import (EntropyCoeffSchedule, LearningRateSchedule, SampleBatch,
                         ValueNetworkMixin, build_tf_policy)
from tfrl.utils.tf_ops import explained_variance


class TrajectoryFragments:
    """The loss reads whole fragments of `policy.fragment_length` (= rollout_fragment_length)
    steps; the dummy batch that initializes the loss is one such fragment."""

    def _setup_mixin(self):
        self.fragment_length = int(self.config["rollout_fragment_length"])

    def _dummy_batch(self, size: int = 4):
        return super()._dummy_batch(self.fragment_length)


def time_major(x, fragment_length: int):
    """Rows [B * T, ...] of B fragments (batch-major) -> [T, B, ...]."""
    x = tf.reshape(x, [-1, fragment_length, *x.shape[1:]])
    return tf.transpose(x, [1, 0, *range(2, len(x.shape))])


class FragmentOutputs:
    """What the losses of IMPALA and APPO need from one model pass over a batch of fragments:
    time-major [T, B] tensors, and the current and behaviour action distributions (rows)."""

    def __init__(self, policy, model, dist_class, train_batch):
        length = policy.fragment_length
        obs = train_batch[SampleBatch.OBS]
        rows = tf.shape(tree.flatten(obs)[0])[0]
        # one pass over observations and next observations: the next values bootstrap
        both = tree.map_structure(lambda a, b: tf.concat([a, b], axis=0), obs,
                                  train_batch[SampleBatch.NEXT_OBS])
        logits, _ = model({"obs": both})
        values_both = model.value_function()
        logits = logits[:rows]
        values, next_values = values_both[:rows], values_both[rows:]
        self.dist = dist_class(logits, model)
        self.behaviour_dist = dist_class(train_batch[SampleBatch.ACTION_DIST_INPUTS], model)
        actions = train_batch[SampleBatch.ACTIONS]
        logp = self.dist.logp(actions)
        log_rhos = logp - self.behaviour_dist.logp(actions)
        terminated = tf.cast(train_batch[SampleBatch.TERMINATEDS], tf.float32)
        ended = tf.maximum(terminated, tf.cast(train_batch[SampleBatch.TRUNCATEDS], tf.float32))

        def tm(x):
            return time_major(x, length)

        continues = tm(1.0 - ended)
        continues = tf.concat([continues[:-1], tf.zeros_like(continues[-1:])], axis=0)
        config = policy.config
        self.vtrace = vtrace_returns(
            log_rhos=tm(log_rhos), discounts=tm(config["gamma"] * (1.0 - terminated)),
            rewards=tm(tf.cast(train_batch[SampleBatch.REWARDS], tf.float32)),
            values=tm(values), next_values=tm(next_values), continues=continues,
            clip_rho_threshold=config["vtrace_clip_rho_threshold"],
            clip_c_threshold=config["vtrace_clip_c_threshold"],
            clip_pg_rho_threshold=config["vtrace_clip_pg_rho_threshold"])
        self.logp = tm(logp)
        self.log_rhos = tm(log_rhos)
        self.values = tm(values)
        self.entropy = tf.reduce_mean(self.dist.entropy())


def vtrace_loss(policy, model, dist_class, train_batch):
    """The IMPALA loss of the module docstring; stores its parts on the policy for the stats."""
    out = FragmentOutputs(policy, model, dist_class, train_batch)
    policy.policy_loss = -tf.reduce_mean(out.logp * out.vtrace.pg_advantages)
    policy.vf_loss = 0.5 * tf.reduce_mean(tf.square(out.values - out.vtrace.vs))
    policy.policy_entropy = out.entropy
    policy.mean_rho = tf.reduce_mean(tf.exp(out.log_rhos))
    policy.vf_explained_var = explained_variance(tf.reshape(out.vtrace.vs, [-1]),
                                                 tf.reshape(out.values, [-1]))
    policy.total_loss = (policy.policy_loss + policy.config["vf_loss_coeff"] * policy.vf_loss
                         - policy.entropy_coeff * policy.policy_entropy)
    return policy.total_loss


def make_learner_optimizer(policy, config):
    """Adam, or the IMPALA paper's RMSProp, as config["opt_type"] says (shared with APPO)."""
    if config["opt_type"] == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate=config["lr"], rho=config["decay"],
                                        momentum=config["momentum"], epsilon=config["epsilon"])
    return keras.optimizers.Adam(learning_rate=config["lr"])


def vtrace_stats(policy, train_batch):
    return {
        "total_loss": policy.total_loss,
        "policy_loss": policy.policy_loss,
        "vf_loss": policy.vf_loss,
        "entropy": policy.policy_entropy,
        "mean_rho": policy.mean_rho,
        "vf_explained_var": policy.vf_explained_var,
        "entropy_coeff": tf.identity(policy.entropy_coeff),
        "cur_lr": tf.cast(policy.optimizer.learning_rate, tf.float32),
    }


VTraceTFPolicy = build_tf_policy(
    "VTraceTFPolicy",
    loss_fn=vtrace_loss,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    stats_fn=vtrace_stats,
    optimizer_fn=make_learner_optimizer,
    mixins=[TrajectoryFragments, ValueNetworkMixin, LearningRateSchedule, EntropyCoeffSchedule],
)
