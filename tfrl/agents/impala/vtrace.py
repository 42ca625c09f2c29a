"""V-trace: the off-policy corrected value targets and policy-gradient advantages of IMPALA.

Part of the IMPALA policy (impala_policy.py); pure TensorFlow, traced inside the loss. Espeholt
et al. 2018, eq. (1): for a trajectory x_s .. x_{s+n} sampled by a behaviour policy mu while
learning pi,

    v_s = V(x_s) + sum_{t=s}^{s+n-1} gamma^(t-s) (prod_{i=s}^{t-1} c_i) delta_t V
    delta_t V = rho_t (r_t + gamma V(x_{t+1}) - V(x_t))
    rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)),   c_i = min(c_bar, pi(a_i|x_i) / mu(a_i|x_i))

computed backwards as v_s - V(x_s) = delta_s V + gamma c_s (v_{s+1} - V(x_{s+1})), and the
policy-gradient advantage rho_pg_s (r_s + gamma v_{s+1} - V(x_s)) with its own clip.

Fragments here may hold several episodes: every step carries its own discount (gamma, or 0 where
the episode terminated), the value of its own next observation (so a truncated episode
bootstraps from its last state) and a `continues` flag (0 where the episode ended, terminated
or truncated, and at the fragment's last step), which cuts the recursion there: the sum never
runs into the next episode, and at a cut v_{s+1} is replaced by V(x'_s).

All tensors are time-major, [T, B].
"""
from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf


class VTraceReturns(NamedTuple):
    vs: tf.Tensor             # [T, B] value targets v_s
    pg_advantages: tf.Tensor  # [T, B] rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s))
    advantages: tf.Tensor     # [T, B] r_s + gamma_s v_{s+1} - V(x_s), without the weight


def vtrace_returns(log_rhos, discounts, rewards, values, next_values, continues,
                   clip_rho_threshold=1.0, clip_c_threshold=1.0,
                   clip_pg_rho_threshold=1.0) -> VTraceReturns:
    """V-trace targets and advantages (module docstring), without gradients through them.

    Args:
      log_rhos: [T, B] log pi(a_t|x_t) - log mu(a_t|x_t).
      discounts: [T, B] gamma_t: gamma, or 0 where the episode terminated at step t.
      rewards: [T, B] r_t.
      values: [T, B] V(x_t).
      next_values: [T, B] V(x'_t), the value of step t's next observation.
      continues: [T, B] 1.0 where step t+1 continues step t's episode within the fragment,
        else 0.0.
      clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold: rho_bar, c_bar and the
        policy-gradient rho's clip (None: no clipping).

    Raises:
      ValueError / InvalidArgumentError: inputs of different shapes (from TensorFlow).
    """
    log_rhos = tf.convert_to_tensor(log_rhos, tf.float32)
    discounts, rewards, values, next_values, continues = (
        tf.convert_to_tensor(x, tf.float32)
        for x in (discounts, rewards, values, next_values, continues))
    rhos = tf.exp(log_rhos)
    clipped_rhos = rhos if clip_rho_threshold is None else tf.minimum(clip_rho_threshold, rhos)
    cs = rhos if clip_c_threshold is None else tf.minimum(clip_c_threshold, rhos)
    deltas = clipped_rhos * (rewards + discounts * next_values - values)
    decay = discounts * cs * continues

    def backward(acc, step):
        delta, d = step
        return delta + d * acc

    # acc_s = v_s - V(x_s), scanned from the last step back (acc_T = 0: the bootstrap)
    corrections = tf.scan(backward, (deltas, decay), initializer=tf.zeros_like(deltas[0]),
                          reverse=True)
    vs = values + corrections
    # v_{s+1} where step s+1 continues the episode, else the bootstrap V(x'_s)
    vs_next_corrections = tf.concat([corrections[1:], tf.zeros_like(corrections[:1])], axis=0)
    vs_next = next_values + continues * vs_next_corrections
    pg_rhos = rhos if clip_pg_rho_threshold is None else tf.minimum(clip_pg_rho_threshold, rhos)
    advantages = rewards + discounts * vs_next - values
    return VTraceReturns(tf.stop_gradient(vs), tf.stop_gradient(pg_rhos * advantages),
                         tf.stop_gradient(advantages))
