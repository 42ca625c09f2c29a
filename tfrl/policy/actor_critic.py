"""The gradient step shared by the off-policy actor-critic policies (DDPG, TD3, SAC).

This sits between a policy's loss and the learner (tfrl/learner/): a learner takes one gradient
of the policy's whole loss per step (`replica_scaling.scaled_gradients`), and these hooks turn
that one step into what the algorithms need:

- `actor_critic_gradients` (a `gradients_fn`): gradients of the summed loss
  critic_loss + actor_loss (+ alpha_loss) with respect to the actor, critic and temperature
  variables of an `ActorCriticQModel`. The losses are written so that each term reaches only
  its own variables (targets under stop_gradient, the actor's loss through the critic with
  frozen weights, alpha's loss only through log_alpha), so one gradient of the sum is the
  three separate gradients. `grad_clip` clips each group by its own global norm.
- `apply_actor_critic_gradients` (an `apply_gradients_fn`): each group goes to its own
  optimizer (`policy.critic_optimizer` = `policy.optimizer`, `policy.actor_optimizer`,
  `policy.alpha_optimizer`). The actor update and the polyak target update
  (target <- tau * online + (1 - tau) * target) run every `policy_delay`-th critic update
  (TD3's delayed policy updates; 1 for DDPG and SAC), counted by the critic optimizer's
  `iterations`, so the delay survives checkpoints.

The delayed part runs in the strategy's cross-replica context (one `merge_call`): a
synchronisation point (an optimizer's gradient all-reduce) may not sit inside a conditional in
a replica function, so the actor's gradients are all-reduced first, unconditionally, and the
conditional then only updates variables, on every device.

`setup_actor_critic_optimizers` (call it from `before_loss_init`) builds the optimizers' slots
on their own variables and adds them to the policy's state.
"""
from __future__ import annotations

import functools
from typing import Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.errors import InvalidConfigError, UnsupportedSpaceError


def validate_box_actions(policy, observation_space, action_space, config):
    """Refuses what the actor-critic policies cannot act in.

    Raises:
        UnsupportedSpaceError: the action space is not a 1-D Box with finite bounds.
        InvalidConfigError: the model config asks for an LSTM.
    """
    if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        raise UnsupportedSpaceError(
            f"{type(policy).__name__} needs a 1-D Box action space, got {action_space}; use "
            "DQN or PPO for discrete actions.")
    if not (np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))):
        raise UnsupportedSpaceError(
            f"{type(policy).__name__} acts within the action bounds, but {action_space} is "
            "unbounded; bound it (e.g. gymnasium's ClipAction wrapper).")
    if config["model"].get("use_lstm"):
        raise InvalidConfigError(f"{type(policy).__name__} does not support recurrent models; "
                                 "set model use_lstm False.")


def action_bounds(policy):
    """(low, high) float32 arrays the policy acts within: the Box bounds, or [-1, 1] when the
    env side rescales them (config normalize_actions).

    Raises:
        InvalidConfigError: the action space has infinite bounds.
    """
    space = policy.action_space
    if policy.config.get("normalize_actions"):
        shape = space.shape
        return -np.ones(shape, np.float32), np.ones(shape, np.float32)
    low, high = space.low.astype(np.float32), space.high.astype(np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise InvalidConfigError(
            f"continuous-control policies act within finite bounds, but the action space is "
            f"{space}; bound the action space (e.g. gymnasium's ClipAction/RescaleAction "
            "wrappers) or set normalize_actions with finite bounds")
    return low, high


def squash_to_bounds(x, low, high):
    """tanh(x) rescaled from [-1, 1] to [low, high]."""
    return low + (tf.tanh(x) + 1.0) * (high - low) / 2.0


def normalized_actions(actions, low, high):
    """Actions rescaled from [low, high] to [-1, 1] (what the critics take as input)."""
    return 2.0 * (tf.cast(actions, tf.float32) - low) / (high - low) - 1.0


def with_uniform_warmup(actions, low, high, timestep, random_timesteps: int, explore, seed):
    """`actions`, replaced by uniform random actions in [low, high] while exploring and
    `timestep` < random_timesteps (the warm-up that fills replay before the actor has learned)."""
    if random_timesteps <= 0:
        return actions
    shape = tf.shape(actions)
    if seed is None:
        uniform = tf.random.uniform(shape)
    else:
        uniform = tf.random.stateless_uniform(shape, seed=tf.random.experimental.stateless_fold_in(
            seed, 7919))
    random_actions = low + uniform * (high - low)
    warm = tf.logical_and(tf.cast(explore, tf.bool),
                          tf.cast(timestep, tf.int64) < int(random_timesteps))
    return tf.where(warm, random_actions, actions)


class ServingExport:
    """Mixin: `policy.serving` is True while the policy writes its serving SavedModel, so the
    action sampler leaves out what only makes sense in training rollouts (the uniform warm-up,
    exploration noise state)."""

    def _setup_mixin(self):
        self.serving = False

    def export_model(self, export_dir: str, *args, **kwargs) -> None:
        self.serving = True
        try:
            super().export_model(export_dir, *args, **kwargs)
        finally:
            self.serving = False


def setup_actor_critic_optimizers(policy, actor_optimizer, alpha_optimizer=None,
                                  target_actor: bool = True) -> None:
    """Registers the policy's optimizers (module docstring) and the target pairs to polyak-update.

    `policy.optimizer` becomes `policy.critic_optimizer`; each optimizer builds its slots on its
    own variables only, and the actor and alpha optimizers' variables join the policy's state.
    `target_actor`: also move the target actor (DDPG/TD3; SAC's target has only critics).
    """
    model, target = policy.model, policy.target_model
    policy.critic_optimizer = policy.optimizer
    policy.critic_optimizer.build(model.critic_variables())
    policy.actor_optimizer = actor_optimizer
    actor_optimizer.build(model.actor_variables())
    policy._extra_state_variables["actor_optimizer"] = list(actor_optimizer.variables)  # noqa: SLF001
    policy.alpha_optimizer = alpha_optimizer
    if alpha_optimizer is not None:
        alpha_optimizer.build(model.alpha_variables())
        policy._extra_state_variables["alpha_optimizer"] = list(alpha_optimizer.variables)  # noqa: SLF001
    sources = model.critic_variables()
    targets = target.critic_variables()
    if target_actor:
        sources, targets = model.actor_variables() + sources, target.actor_variables() + targets
    policy.polyak_pairs = list(zip(targets, sources))


def _variable_groups(model):
    return model.actor_variables(), model.critic_variables(), model.alpha_variables()


def actor_critic_gradients(policy, optimizer, tape, loss):
    """(gradient, variable) pairs of the summed loss for actor, critic and alpha variables, each
    group clipped by its own global norm when config grad_clip is set."""
    groups = _variable_groups(policy.model)
    variables = [v for group in groups for v in group]
    grads = tape.gradient(loss, variables)
    clip = policy.config.get("grad_clip")
    if clip:
        clipped, start = [], 0
        for group in groups:
            part = grads[start:start + len(group)]
            start += len(group)
            if part and all(g is not None for g in part):
                part, _ = tf.clip_by_global_norm(part, clip)
            clipped.extend(part)
        grads = clipped
    return list(zip(grads, variables))


def apply_actor_critic_gradients(policy, optimizer, grads_and_vars) -> None:
    """Critic and alpha updates every step; actor and polyak target updates every
    `policy_delay`-th step (module docstring). Call it in a replica context."""
    actor_vars, critic_vars, alpha_vars = _variable_groups(policy.model)
    by_id = {id(v): g for g, v in grads_and_vars}
    critic = [(by_id[id(v)], v) for v in critic_vars if id(v) in by_id]
    alpha = [(by_id[id(v)], v) for v in alpha_vars if id(v) in by_id]
    actor = [(by_id[id(v)], v) for v in actor_vars if id(v) in by_id]
    policy.critic_optimizer.apply_gradients(critic)
    if alpha:
        policy.alpha_optimizer.apply_gradients(alpha)
    actor = policy.actor_optimizer.aggregate_gradients(actor)
    grads = [g for g, _ in actor]
    variables = [v for _, v in actor]
    context = tf.distribute.get_replica_context()
    context.merge_call(functools.partial(_delayed_actor_and_target_update, policy, variables),
                       args=(grads,))


def _delayed_actor_and_target_update(policy, variables, strategy, grads) -> None:
    delay = int(policy.config["policy_delay"])
    tau = float(policy.config["tau"])
    actor_optimizer = policy.actor_optimizer

    def update():
        for grad, var in zip(grads, variables):
            strategy.extended.update(var, lambda v, g: actor_optimizer.update_step(g, v),
                                     args=(grad,), group=False)
        actor_optimizer.iterations.assign_add(1)
        polyak_update(strategy, policy.polyak_pairs, tau)
        return tf.constant(True)

    if delay == 1:
        update()
        return
    tf.cond(tf.equal(policy.critic_optimizer.iterations % delay, 0), update,
            lambda: tf.constant(False))


def polyak_update(strategy, pairs, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target for (target, source) variable pairs, on every
    device (call in a cross-replica context or without a strategy)."""
    for target, source in pairs:
        strategy.extended.update(target, lambda t, s: t.assign(tau * s + (1.0 - tau) * t),
                                 args=(source,), group=False)


def validate_actor_critic_config(name: str, config: dict, *, min_tau: float = 0.0) -> None:
    """Checks shared by the DDPG/TD3/SAC trainers.

    Raises:
        InvalidConfigError: tau outside (0, 1], policy_delay, n_step, train_batch_size or
            rollout_fragment_length below 1, buffer_size below train_batch_size, negative
            learning_starts, a non-positive training_intensity.
    """
    if not min_tau < float(config["tau"]) <= 1.0:
        raise InvalidConfigError(f"{name}: tau must be in (0, 1], got {config['tau']}.")
    for key in ("policy_delay", "n_step", "train_batch_size", "rollout_fragment_length",
                "broadcast_interval"):
        if int(config[key]) < 1:
            raise InvalidConfigError(f"{name}: {key} must be >= 1, got {config[key]}.")
    if int(config["buffer_size"]) < int(config["train_batch_size"]):
        raise InvalidConfigError(
            f"{name}: buffer_size ({config['buffer_size']}) must be at least train_batch_size "
            f"({config['train_batch_size']}).")
    if int(config["learning_starts"]) < 0:
        raise InvalidConfigError(
            f"{name}: learning_starts must be >= 0, got {config['learning_starts']}.")
    intensity: Optional[float] = config.get("training_intensity")
    if intensity is not None and intensity <= 0:
        raise InvalidConfigError(
            f"{name}: training_intensity must be > 0 or None, got {intensity}.")
