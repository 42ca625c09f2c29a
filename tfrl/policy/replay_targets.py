"""n-step replay transitions and their bootstrapped targets, shared by the Q-learning policies.

On the rollout worker, `postprocess_nstep_and_prio` turns an episode piece into n-step
transitions (`adjust_nstep`) with a `weights` column that replay later fills with importance
weights; in the learner's loss, `compute_q_targets` bootstraps from the next state's value.
DQN, DDPG/TD3 and SAC all declare these two; only the value of the next state differs.
"""
from __future__ import annotations

import tensorflow as tf

# postprocess_nstep_and_prio lives with the other trajectory postprocessing (no TensorFlow: the
# numpy stand-ins of rollout workers call it); imported here for the policies that declare it
from tfrl.policy.postprocessing import postprocess_nstep_and_prio  # noqa: F401
from tfrl.policy.sample_batch import SampleBatch


def compute_q_targets(rewards, terminateds, n_steps, q_tp1_best, gamma):
    """R + gamma**n_steps * (1 - terminated) * Q(s', a*), all [B]. Only a terminated transition
    has no bootstrap; a truncated one bootstraps from s'."""
    discount = tf.pow(tf.cast(gamma, tf.float32), tf.cast(n_steps, tf.float32))
    not_terminated = 1.0 - tf.cast(terminateds, tf.float32)
    return rewards + discount * not_terminated * q_tp1_best


def td_error_fetches(policy):
    """The learner fetches the TD errors of the batch, for the replay priorities."""
    return {SampleBatch.TD_ERROR: policy.td_error}


def q_value_stats(policy) -> dict:
    """Learner statistics of the Q estimates and TD errors of the batch (DQN, DDPG/TD3, SAC)."""
    return {
        "mean_q": tf.reduce_mean(policy.q_t),
        "min_q": tf.reduce_min(policy.q_t),
        "max_q": tf.reduce_max(policy.q_t),
        "mean_td_error": tf.reduce_mean(policy.td_error),
    }
