"""SACTFPolicy: soft actor-critic with automatic entropy tuning, declared with build_tf_policy.

This is an algorithm's policy. The model is an `ActorCriticQModel` whose actor outputs the mean
and log-std of a Gaussian that the catalog's `SquashedGaussian` squashes into the action bounds
(so actions, also in exported SavedModels, always lie within them), with twin critics and the
temperature's logarithm `log_alpha`. Rollout workers write n-step transitions
(`postprocess_nstep_and_prio`); the learner minimises `sac_losses`, with a' ~ pi(.|s') and
a~ ~ pi(.|s) reparameterised draws (`SquashedGaussian.sample_and_logp`):

    target = R_n + gamma**k * (1 - terminated) * (min_i Q_target_i(s', a') - alpha * log pi(a'|s'))
    critic = 0.5 * sum_i mean(w * (Q_i(s, a) - target)**2)
    actor  = mean(alpha * log pi(a~|s) - min_i Q_i(s, a~))          (critic weights frozen)
    alpha  = -mean(log_alpha * (log pi(a~|s) + target_entropy))      (only log_alpha moves)

alpha = exp(log_alpha) enters the target and the actor's loss as a constant. The shared
actor-critic step (tfrl/policy/actor_critic.py) applies each part with its own optimizer and
moves the target critics by polyak `tau`. Critics take actions normalised to [-1, 1].

See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf
import tf_keras as keras

from tfrl.agents.sac.config import DEFAULT_CONFIG
from tfrl.config import policy_defaults
from tfrl.errors import InvalidConfigError
from tfrl.models.actor_critic import ActorCriticQModel
from tfrl.models.distributions import SquashedGaussian
from tfrl.policy import ComputeTDErrorMixin, SampleBatch, TargetNetworkMixin, build_tf_policy
from tfrl.policy.actor_critic import (action_bounds, actor_critic_gradients,
                                      apply_actor_critic_gradients, normalized_actions,
                                      ServingExport, setup_actor_critic_optimizers, validate_box_actions,
                                      with_uniform_warmup)
from tfrl.policy.replay_targets import (compute_q_targets, postprocess_nstep_and_prio, q_value_stats,
                                         td_error_fetches)


def target_entropy_of(config, action_space) -> float:
    """config target_entropy, or -dim(actions) for "auto".

    Raises:
        InvalidConfigError: a value that is neither "auto" nor a number.
    """
    value = config["target_entropy"]
    if value == "auto" or value is None:
        return -float(np.prod(action_space.shape))
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"SAC: target_entropy must be 'auto' or a number, got {value!r}.") from None


def build_sac_models(policy, observation_space, action_space, config):
    """The online ActorCriticQModel with log_alpha (returned) and its target copy."""
    dim = int(np.prod(action_space.shape))
    if float(config["initial_alpha"]) <= 0:
        raise InvalidConfigError(
            f"SAC: initial_alpha must be > 0, got {config['initial_alpha']}.")

    def make(name):
        return ActorCriticQModel(
            observation_space, action_space, 2 * dim, config["model"], name=name,
            actor_hiddens=config["actor_hiddens"],
            actor_activation=config["actor_hidden_activation"],
            critic_hiddens=config["critic_hiddens"],
            critic_activation=config["critic_hidden_activation"], twin_q=config["twin_q"],
            initial_alpha=config["initial_alpha"])

    policy.low, policy.high = action_bounds(policy)
    policy.target_entropy = target_entropy_of(config, action_space)
    policy.target_model = make("target_sac_model")
    return make("sac_model")


def squashed_gaussian(policy, actor_outputs) -> SquashedGaussian:
    return SquashedGaussian(actor_outputs, low=policy.low, high=policy.high)


def critic_optimizer(policy, config):
    return keras.optimizers.Adam(learning_rate=config["optimization"]["critic_learning_rate"])


def setup_actor_and_alpha_optimizers(policy, observation_space, action_space, config):
    rates = config["optimization"]
    setup_actor_critic_optimizers(
        policy, keras.optimizers.Adam(learning_rate=rates["actor_learning_rate"]),
        alpha_optimizer=keras.optimizers.Adam(learning_rate=rates["entropy_learning_rate"]),
        target_actor=False)


def sample_squashed_gaussian(policy, model, obs_batch, state_batches, explore, timestep, seed):
    """A sample of the squashed Gaussian when exploring (uniform during the warm-up), its mode
    otherwise. Returns (actions [B, dim] within the bounds, logp, state_out)."""
    outputs, state_out = model({SampleBatch.OBS: obs_batch}, state_batches, None)
    dist = squashed_gaussian(policy, outputs)
    explore = tf.cast(explore, tf.bool)
    sampled, sampled_logp = dist.sample_and_logp(seed=seed)
    mode = dist.deterministic_sample()
    actions = tf.where(explore, sampled, mode)
    logp = tf.where(explore, sampled_logp, dist.logp(mode))
    random_timesteps = (0 if policy.serving
                        else int(policy.config["exploration_config"]["random_timesteps"]))
    actions = with_uniform_warmup(actions, policy.low, policy.high, timestep, random_timesteps,
                                  explore, seed)
    return tf.clip_by_value(actions, policy.low, policy.high), logp, state_out


def sac_losses(policy, model, dist_class, train_batch):
    """The critic, actor and alpha losses of the module docstring, summed (see actor_critic.py);
    stores the parts and the per-sample TD error on the policy."""
    config = policy.config
    low, high = policy.low, policy.high
    obs, new_obs = train_batch[SampleBatch.OBS], train_batch[SampleBatch.NEXT_OBS]
    alpha = tf.stop_gradient(tf.exp(model.log_alpha))

    next_outputs, _ = model({SampleBatch.OBS: new_obs})
    next_actions, next_logp = squashed_gaussian(policy, next_outputs).sample_and_logp()
    q_next = policy.target_model.q_values(new_obs, normalized_actions(next_actions, low, high))
    q_next_min = q_next[0] if len(q_next) == 1 else tf.minimum(q_next[0], q_next[1])
    targets = tf.stop_gradient(compute_q_targets(
        train_batch[SampleBatch.REWARDS], train_batch[SampleBatch.TERMINATEDS],
        train_batch[SampleBatch.N_STEPS], q_next_min - alpha * next_logp, config["gamma"]))

    q_taken = model.q_values(obs, normalized_actions(train_batch[SampleBatch.ACTIONS], low, high))
    weights = train_batch[SampleBatch.PRIO_WEIGHTS]
    td_errors = [q - targets for q in q_taken]
    policy.critic_loss = 0.5 * tf.add_n([tf.reduce_mean(weights * tf.square(td))
                                         for td in td_errors])

    outputs, _ = model({SampleBatch.OBS: obs})
    actions, logp = squashed_gaussian(policy, outputs).sample_and_logp()
    q_policy = model.q_values(obs, normalized_actions(actions, low, high), frozen=True)
    q_policy_min = q_policy[0] if len(q_policy) == 1 else tf.minimum(q_policy[0], q_policy[1])
    policy.actor_loss = tf.reduce_mean(alpha * logp - q_policy_min)
    policy.alpha_loss = -tf.reduce_mean(
        model.log_alpha * tf.stop_gradient(logp + policy.target_entropy))

    policy.q_t = q_taken[0]
    policy.logp_t = logp
    policy.alpha_value = alpha
    policy.td_error = (td_errors[0] if len(td_errors) == 1
                       else 0.5 * (tf.abs(td_errors[0]) + tf.abs(td_errors[1])))
    return policy.critic_loss + policy.actor_loss + policy.alpha_loss


def sac_stats(policy, train_batch):
    return {
        "critic_loss": policy.critic_loss,
        "actor_loss": policy.actor_loss,
        "alpha_loss": policy.alpha_loss,
        "alpha_value": policy.alpha_value,
        "entropy": -tf.reduce_mean(policy.logp_t),
        "target_entropy": tf.constant(policy.target_entropy, tf.float32),
        **q_value_stats(policy),
    }


SACTFPolicy = build_tf_policy(
    "SACTFPolicy",
    loss_fn=sac_losses,
    get_default_config=functools.partial(policy_defaults, DEFAULT_CONFIG),
    validate_spaces=validate_box_actions,
    make_model=build_sac_models,
    optimizer_fn=critic_optimizer,
    before_loss_init=setup_actor_and_alpha_optimizers,
    action_sampler_fn=sample_squashed_gaussian,
    postprocess_fn=postprocess_nstep_and_prio,
    stats_fn=sac_stats,
    extra_learn_fetches_fn=td_error_fetches,
    gradients_fn=actor_critic_gradients,
    apply_gradients_fn=apply_actor_critic_gradients,
    mixins=[TargetNetworkMixin, ComputeTDErrorMixin, ServingExport],
)
