"""DDPGTFPolicy: deterministic actor-critic (DDPG, and TD3 by config) with build_tf_policy.

This is an algorithm's policy. The model is an `ActorCriticQModel` (online and target copy);
the actor's output is squashed into the action bounds, a = low + (tanh(x) + 1) (high - low) / 2,
so every action (also with exploration noise, and in exported SavedModels) lies within them.
The critics take actions normalised to [-1, 1]. Rollout workers write n-step transitions
(`postprocess_nstep_and_prio`); the learner minimises `ddpg_losses`:

    a'       = mu_target(s')                  + clip(N(0, target_noise), +-target_noise_clip)
                                                (TD3 target policy smoothing), clipped to bounds
    target   = R_n + gamma**k * (1 - terminated) * min_i Q_target_i(s', a')  (i = 1, 2 with twin_q)
    critic   = sum_i mean(w * (Q_i(s, a) - target)**2)     (or Huber with critic_loss "huber")
    actor    = -mean(Q_1(s, mu(s)))                         (critic weights frozen)

and the shared actor-critic step (tfrl/policy/actor_critic.py) applies the critic every step and
the actor plus the polyak target update every `policy_delay` steps. Exploration
(`ContinuousNoiseExploration`): Gaussian or Ornstein-Uhlenbeck noise on the normalised action,
uniform random actions for the first `random_timesteps`, none with explore=False.

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import functools
from typing import Dict

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.agents.ddpg.config import DEFAULT_CONFIG
from tfrl.config import policy_defaults
from tfrl.errors import InvalidConfigError
from tfrl.models.actor_critic import ActorCriticQModel
from tfrl.policy import ComputeTDErrorMixin, SampleBatch, TargetNetworkMixin, build_tf_policy
from tfrl.policy.actor_critic import (action_bounds, actor_critic_gradients,
                                      apply_actor_critic_gradients, normalized_actions,
                                      ServingExport, setup_actor_critic_optimizers, validate_box_actions,
                                      with_uniform_warmup)
from tfrl.policy.replay_targets import (compute_q_targets, postprocess_nstep_and_prio, q_value_stats,
                                         td_error_fetches)
from tfrl.utils.schedules import LinearSchedule
from tfrl.utils.tf_ops import assign_scalar

NOISE_TYPES = ("GaussianNoise", "OrnsteinUhlenbeckNoise")


def noise_scale_schedule(exploration_config: Dict):
    """The LinearSchedule of the noise scale.

    Raises:
        InvalidConfigError: an unknown noise type, negative scales, stddev, OU parameters or
            timesteps.
    """
    noise_type = exploration_config["type"]
    if noise_type not in NOISE_TYPES:
        raise InvalidConfigError(
            f"exploration_config type must be one of {NOISE_TYPES}, got {noise_type!r}.")
    for key in ("random_timesteps", "stddev", "ou_theta", "ou_sigma", "ou_base_scale",
                "initial_scale", "final_scale", "scale_timesteps"):
        if float(exploration_config[key]) < 0:
            raise InvalidConfigError(
                f"exploration_config {key} must be >= 0, got {exploration_config[key]}.")
    return LinearSchedule(max(int(exploration_config["scale_timesteps"]), 1),
                          final_p=float(exploration_config["final_scale"]),
                          initial_p=float(exploration_config["initial_scale"]))


class ContinuousNoiseExploration:
    """Exploration noise for a deterministic actor (module docstring).

    Keeps `policy.noise_scale` (a variable the traced action sampler reads) at the scale
    schedule's value for the timestep actions are computed for, and `policy.ou_state` (the
    Ornstein-Uhlenbeck process, one value per action dimension shared by the worker's envs).
    Exported models serve the noiseless actor's action (as "actions" and
    "deterministic_actions"), like DQN's greedy export.
    """

    def _setup_mixin(self):
        exploration = self.config["exploration_config"]
        self.noise_schedule = noise_scale_schedule(exploration)
        self._noise_value = self.noise_schedule.value(self.global_timestep)
        self.noise_scale = tf.Variable(self._noise_value, trainable=False, dtype=tf.float32,
                                       name="noise_scale")
        self.ou_state = tf.Variable(np.zeros(self.action_space.shape, np.float32),
                                    trainable=False, name="ou_state")

    def _sync_noise_scale(self, timestep: int) -> None:
        value = self.noise_schedule.value(timestep)
        if value != self._noise_value:
            self._noise_value = value
            assign_scalar(self.noise_scale, value)

    def set_noise_scale_schedule(self, schedule) -> None:
        """Replaces the noise scale schedule (Ape-X gives each worker a constant scale)."""
        self.noise_schedule = schedule
        self._sync_noise_scale(self.global_timestep)

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, explore=None, timestep=None, **kwargs):
        self._sync_noise_scale(self.global_timestep if timestep is None else int(timestep))
        return super().compute_actions(obs_batch, state_batches, prev_action_batch,
                                       prev_reward_batch, explore=explore, timestep=timestep,
                                       **kwargs)

    def on_global_var_update(self, global_vars: Dict) -> None:
        super().on_global_var_update(global_vars)
        self._sync_noise_scale(self.global_timestep)


def build_ddpg_models(policy, observation_space, action_space, config):
    """The online ActorCriticQModel (returned) and its target copy (policy.target_model)."""
    dim = int(np.prod(action_space.shape))

    def make(name):
        return ActorCriticQModel(
            observation_space, action_space, dim, config["model"], name=name,
            actor_hiddens=config["actor_hiddens"],
            actor_activation=config["actor_hidden_activation"],
            critic_hiddens=config["critic_hiddens"],
            critic_activation=config["critic_hidden_activation"], twin_q=config["twin_q"])

    policy.low, policy.high = action_bounds(policy)
    policy.target_model = make("target_actor_critic")
    return make("actor_critic")


def critic_optimizer(policy, config):
    return keras.optimizers.Adam(learning_rate=config["critic_lr"])


def setup_actor_optimizer(policy, observation_space, action_space, config):
    setup_actor_critic_optimizers(policy, keras.optimizers.Adam(learning_rate=config["actor_lr"]))


def _normal(shape, seed, salt: int):
    if seed is None:
        return tf.random.normal(shape)
    return tf.random.stateless_normal(shape, seed=tf.random.experimental.stateless_fold_in(
        seed, salt))


def sample_noisy_actions(policy, model, obs_batch, state_batches, explore, timestep, seed):
    """The actor's action, with exploration noise when exploring (module docstring).
    Returns (actions [B, dim] within the bounds, None, state_out)."""
    x, state_out = model({SampleBatch.OBS: obs_batch}, state_batches, None)
    normalized = tf.tanh(x)
    low, high = policy.low, policy.high
    if policy.serving:  # exported models act deterministically
        return low + (normalized + 1.0) * (high - low) / 2.0, None, state_out
    exploration = policy.config["exploration_config"]
    explore = tf.cast(explore, tf.bool)
    if exploration["type"] == "GaussianNoise":
        noise = float(exploration["stddev"]) * _normal(tf.shape(normalized), seed, 1)
    else:
        theta, sigma = float(exploration["ou_theta"]), float(exploration["ou_sigma"])
        step = -theta * policy.ou_state + sigma * _normal(tf.shape(policy.ou_state), seed, 2)
        ou_value = tf.cond(explore, lambda: policy.ou_state.assign_add(step),
                           lambda: tf.identity(policy.ou_state))
        noise = float(exploration["ou_base_scale"]) * ou_value + tf.zeros_like(normalized)
    noisy = tf.clip_by_value(normalized + policy.noise_scale * noise, -1.0, 1.0)
    normalized = tf.where(explore, noisy, normalized)
    actions = low + (normalized + 1.0) * (high - low) / 2.0
    actions = with_uniform_warmup(actions, low, high, timestep,
                                  int(exploration["random_timesteps"]), explore, seed)
    return tf.clip_by_value(actions, low, high), None, state_out


def ddpg_losses(policy, model, dist_class, train_batch):
    """The critic and actor losses of the module docstring, summed (see actor_critic.py);
    stores the parts and the per-sample TD error on the policy."""
    config = policy.config
    low, high = policy.low, policy.high
    obs, new_obs = train_batch[SampleBatch.OBS], train_batch[SampleBatch.NEXT_OBS]
    target_model = policy.target_model

    target_x, _ = target_model({SampleBatch.OBS: new_obs})
    next_normalized = tf.tanh(target_x)
    if config["smooth_target_policy"]:
        noise = tf.clip_by_value(
            float(config["target_noise"]) * tf.random.normal(tf.shape(next_normalized)),
            -float(config["target_noise_clip"]), float(config["target_noise_clip"]))
        next_normalized = tf.clip_by_value(next_normalized + noise, -1.0, 1.0)
    q_next = target_model.q_values(new_obs, next_normalized)
    q_next_min = q_next[0] if len(q_next) == 1 else tf.minimum(q_next[0], q_next[1])
    targets = tf.stop_gradient(compute_q_targets(
        train_batch[SampleBatch.REWARDS], train_batch[SampleBatch.TERMINATEDS],
        train_batch[SampleBatch.N_STEPS], q_next_min, config["gamma"]))

    q_taken = model.q_values(obs, normalized_actions(train_batch[SampleBatch.ACTIONS], low, high))
    weights = train_batch[SampleBatch.PRIO_WEIGHTS]
    td_errors = [q - targets for q in q_taken]
    if config["critic_loss"] == "huber":
        per_critic = [_huber(td) for td in td_errors]
    else:
        per_critic = [tf.square(td) for td in td_errors]
    policy.critic_loss = tf.add_n([tf.reduce_mean(weights * p) for p in per_critic])

    def actor_loss():
        x, _ = model({SampleBatch.OBS: obs})
        return -tf.reduce_mean(model.q_values(obs, tf.tanh(x), frozen=True)[0])

    delay = int(config["policy_delay"])
    if delay == 1:
        policy.actor_loss = actor_loss()
        loss = policy.critic_loss + policy.actor_loss
    else:
        # The actor learns on every `delay`-th step only (apply_actor_critic_gradients, after this
        # step's critic update counts it), so on the others its loss and its gradient (the
        # larger part of a TD3 step with policy_delay 2) are not computed; the statistic is NaN
        # there, which `mean_stats` leaves out.
        updates_actor = tf.equal((policy.critic_optimizer.iterations + 1) % delay, 0)
        actor = tf.cond(updates_actor, actor_loss, lambda: tf.constant(0.0))
        policy.actor_loss = tf.where(updates_actor, actor, float("nan"))
        loss = policy.critic_loss + actor

    policy.q_t = q_taken[0]
    policy.td_error = (td_errors[0] if len(td_errors) == 1
                       else 0.5 * (tf.abs(td_errors[0]) + tf.abs(td_errors[1])))
    return loss


def _huber(x, delta: float = 1.0):
    abs_x = tf.abs(x)
    return tf.where(abs_x <= delta, 0.5 * tf.square(x), delta * (abs_x - 0.5 * delta))


def ddpg_stats(policy, train_batch):
    return {
        "critic_loss": policy.critic_loss,
        "actor_loss": policy.actor_loss,
        **q_value_stats(policy),
    }


DDPGTFPolicy = build_tf_policy(
    "DDPGTFPolicy",
    loss_fn=ddpg_losses,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    validate_spaces=validate_box_actions,
    make_model=build_ddpg_models,
    optimizer_fn=critic_optimizer,
    before_loss_init=setup_actor_optimizer,
    action_sampler_fn=sample_noisy_actions,
    postprocess_fn=postprocess_nstep_and_prio,
    stats_fn=ddpg_stats,
    extra_learn_fetches_fn=td_error_fetches,
    gradients_fn=actor_critic_gradients,
    apply_gradients_fn=apply_actor_critic_gradients,
    mixins=[TargetNetworkMixin, ComputeTDErrorMixin, ServingExport, ContinuousNoiseExploration],
)
