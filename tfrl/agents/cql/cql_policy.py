"""CQLTFPolicy: conservative Q-learning (Kumar et al. 2020, CQL(H)) as a `with_updates` of SAC.

This is an algorithm's policy. SAC's losses (tfrl/agents/sac/sac_policy.py) plus, for each
critic Q_i, a penalty that pushes Q down on actions the data does not hold and up on those it
does, so a policy learnt from recorded experience does not chase over-estimated actions:

    penalty_i = min_q_weight * mean(temperature * logsumexp([Q_i(s, a_rand) - log u,
                                                             Q_i(s, a_cur) - log pi(a_cur|s),
                                                             Q_i(s, a_next) - log pi(a_next|s')]
                                                            / temperature)
                                    - Q_i(s, a_data))

with `num_actions` actions per state from each of: uniform in the action bounds (density u), the
policy at s, and the policy at s' (importance-sampled logsumexp, as classic RLlib's CQL does; the
log-probabilities are constants). For the first `bc_iters` learner steps the actor clones the
data instead: alpha * log pi(a~|s) - log pi(a_data|s). The Lagrangian variant is not built.

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from tfrl.agents.cql.config import DEFAULT_CONFIG
from tfrl.agents.sac.sac_policy import SACTFPolicy, sac_losses, sac_stats, squashed_gaussian
from tfrl.config import policy_defaults
from tfrl.policy import SampleBatch
from tfrl.policy.actor_critic import normalized_actions


def cql_penalty(q_random, q_current, logp_current, q_next, logp_next, q_data,
                log_uniform_density: float, temperature: float, min_q_weight: float):
    """The conservative penalty of one critic (module docstring), a scalar.

    q_random, q_current, q_next, logp_current, logp_next: [B, N]; q_data: [B].
    """
    sampled = tf.concat([q_random - log_uniform_density, q_current - logp_current,
                         q_next - logp_next], axis=1)
    logsumexp = temperature * tf.reduce_logsumexp(sampled / temperature, axis=1)
    return min_q_weight * tf.reduce_mean(logsumexp - q_data)


def _sampled_q_values(policy, model, obs_repeated, actions, batch_size, num_actions):
    """Each critic's Q(s, a) for `num_actions` actions per state, as [B, N] tensors."""
    q_values = model.q_values(obs_repeated, normalized_actions(actions, policy.low, policy.high))
    return [tf.reshape(q, [batch_size, num_actions]) for q in q_values]


def cql_losses(policy, model, dist_class, train_batch):
    """SAC's losses with the conservative penalty on every critic (and behaviour cloning for
    the actor during the first `bc_iters` learner steps); stores the parts on the policy."""
    total = sac_losses(policy, model, dist_class, train_batch)
    config = policy.config
    num_actions = int(config["num_actions"])
    obs, new_obs = train_batch[SampleBatch.OBS], train_batch[SampleBatch.NEXT_OBS]
    batch_size = tf.shape(train_batch[SampleBatch.REWARDS])[0]
    obs_repeated = tf.repeat(obs, num_actions, axis=0)
    new_obs_repeated = tf.repeat(new_obs, num_actions, axis=0)
    dim = int(np.prod(policy.action_space.shape))

    random_actions = tf.random.uniform([batch_size * num_actions, dim], policy.low, policy.high)
    log_uniform_density = -float(np.sum(np.log(policy.action_space.high - policy.action_space.low)))
    current_outputs, _ = model({SampleBatch.OBS: obs_repeated})
    current_actions, current_logp = squashed_gaussian(policy, current_outputs).sample_and_logp()
    next_outputs, _ = model({SampleBatch.OBS: new_obs_repeated})
    next_actions, next_logp = squashed_gaussian(policy, next_outputs).sample_and_logp()
    # the actions and their log-probabilities are inputs of the critics' penalty, not of the actor
    current_actions, next_actions = tf.stop_gradient(current_actions), tf.stop_gradient(next_actions)
    current_logp = tf.reshape(tf.stop_gradient(current_logp), [batch_size, num_actions])
    next_logp = tf.reshape(tf.stop_gradient(next_logp), [batch_size, num_actions])

    sampled = functools.partial(_sampled_q_values, policy, model, obs_repeated,
                                batch_size=batch_size, num_actions=num_actions)
    q_random, q_current, q_next = sampled(random_actions), sampled(current_actions), sampled(next_actions)
    q_data = model.q_values(obs, normalized_actions(train_batch[SampleBatch.ACTIONS], policy.low,
                                                    policy.high))
    penalties = [cql_penalty(q_random[i], q_current[i], current_logp, q_next[i], next_logp,
                             q_data[i], log_uniform_density, float(config["temperature"]),
                             float(config["min_q_weight"]))
                 for i in range(len(q_data))]
    policy.cql_loss = tf.add_n(penalties)
    total = total + policy.cql_loss
    policy.critic_loss = policy.critic_loss + policy.cql_loss

    bc_iters = int(config["bc_iters"])
    if bc_iters > 0:
        # sac_losses' draw a~ ~ pi(.|s) (policy.logp_t) and constant alpha serve the cloning loss
        outputs, _ = model({SampleBatch.OBS: obs})
        data_logp = squashed_gaussian(policy, outputs).logp(train_batch[SampleBatch.ACTIONS])
        bc_loss = tf.reduce_mean(policy.alpha_value * policy.logp_t - data_logp)
        cloning = tf.cast(policy.critic_optimizer.iterations < bc_iters, tf.float32)
        total = total + cloning * (bc_loss - policy.actor_loss)
        policy.actor_loss = cloning * bc_loss + (1.0 - cloning) * policy.actor_loss
    return total


def cql_stats(policy, train_batch):
    return dict(sac_stats(policy, train_batch), cql_loss=policy.cql_loss)


CQLTFPolicy = SACTFPolicy.with_updates(
    name="CQLTFPolicy",
    loss_fn=cql_losses,
    stats_fn=cql_stats,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
)
