"""PPOLoss: the PPO loss as one object of tensors, classic RLlib's (Ray 0.8) way of writing a PPO
variant's loss function (PPOTFPolicy's own loss is `ppo_surrogate_loss` in ppo_policy.py, which
also standardises advantages and leaves the value clip optional).

    loss = mean over valid rows of  -min(A r, A clip(r, 1 - c, 1 + c)) + kl_coeff KL(old || new)
                                    + vf_loss_coeff max((V - T)^2, (V_old + clip(V - V_old) - T)^2)
                                    - entropy_coeff H(new)

with r = exp(logp_new(a) - logp_old(a)); without `use_gae` the value term is left out.
"""
from __future__ import annotations

import gymnasium as gym
import tensorflow as tf


class PPOLoss:
    """Classic RLlib's PPO loss object (Ray 0.8), which custom PPO variants build in their own
    loss functions: `PPOLoss(dist_class, model, value_targets, advantages, actions,
    prev_logits, prev_actions_logp, vf_preds, curr_action_dist, value_fn, cur_kl_coeff,
    valid_mask, entropy_coeff=0, clip_param=0.1, vf_clip_param=0.1, vf_loss_coeff=1.0,
    use_gae=True)`, or with the action space first (Ray 0.8.0's order). Its attributes are
    `loss`, `mean_policy_loss`, `mean_vf_loss`, `mean_kl` and `mean_entropy`, the terms of
    tfrl's PPO loss (ppo_policy.py) averaged over the rows `valid_mask` keeps
    (None: every row)."""

    def __init__(self, *args, **kwargs):
        if args and isinstance(args[0], gym.Space):
            args = args[1:]  # Ray 0.8.0 passed the action space first
        kwargs.pop("action_space", None)
        (dist_class, model, value_targets, advantages, actions, prev_logits, prev_actions_logp,
         vf_preds, curr_action_dist, value_fn, cur_kl_coeff, valid_mask, entropy_coeff,
         clip_param, vf_clip_param, vf_loss_coeff, use_gae) = _ppo_loss_arguments(args, kwargs)

        def mean_valid(values):
            if valid_mask is None:
                return tf.reduce_mean(values)
            return tf.reduce_mean(tf.boolean_mask(values, valid_mask))

        prev_dist = dist_class(prev_logits, model)
        logp_ratio = tf.exp(curr_action_dist.logp(actions) - prev_actions_logp)
        action_kl = prev_dist.kl(curr_action_dist)
        entropy = curr_action_dist.entropy()
        surrogate = tf.minimum(advantages * logp_ratio,
                               advantages * tf.clip_by_value(logp_ratio, 1 - clip_param,
                                                             1 + clip_param))
        self.mean_kl = mean_valid(action_kl)
        self.mean_entropy = mean_valid(entropy)
        self.mean_policy_loss = mean_valid(-surrogate)
        per_row = -surrogate + cur_kl_coeff * action_kl - entropy_coeff * entropy
        if use_gae:
            unclipped = tf.square(value_fn - value_targets)
            clipped = tf.square(vf_preds + tf.clip_by_value(value_fn - vf_preds, -vf_clip_param,
                                                            vf_clip_param) - value_targets)
            vf_loss = tf.maximum(unclipped, clipped)
            self.mean_vf_loss = mean_valid(vf_loss)
            per_row = per_row + vf_loss_coeff * vf_loss
        else:
            self.mean_vf_loss = tf.constant(0.0)
        self.loss = mean_valid(per_row)


_PPO_LOSS_PARAMETERS = (
    ("dist_class", None), ("model", None), ("value_targets", None), ("advantages", None),
    ("actions", None), ("prev_logits", None), ("prev_actions_logp", None), ("vf_preds", None),
    ("curr_action_dist", None), ("value_fn", None), ("cur_kl_coeff", None),
    ("valid_mask", None), ("entropy_coeff", 0.0), ("clip_param", 0.1), ("vf_clip_param", 0.1),
    ("vf_loss_coeff", 1.0), ("use_gae", True))


def _ppo_loss_arguments(args, kwargs) -> list:
    """PPOLoss's arguments in order, from its positional and keyword arguments.

    Raises:
      TypeError: on unknown, repeated or missing arguments (as a Python call would).
    """
    names = [name for name, _ in _PPO_LOSS_PARAMETERS]
    if len(args) > len(names):
        raise TypeError(f"PPOLoss takes at most {len(names)} arguments, got {len(args)}")
    values = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"PPOLoss got an unexpected keyword argument {name!r}")
        if name in values:
            raise TypeError(f"PPOLoss got multiple values for argument {name!r}")
        values[name] = value
    required = [name for name, default in _PPO_LOSS_PARAMETERS[:11] if name not in values]
    if required:
        raise TypeError(f"PPOLoss is missing argument(s) {required}")
    return [values.get(name, default) for name, default in _PPO_LOSS_PARAMETERS]
