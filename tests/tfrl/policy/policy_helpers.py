"""Helpers shared by the policy tests: a tiny actor-critic policy built with build_tf_policy."""
import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.policy import (EntropyCoeffSchedule, LearningRateSchedule, SampleBatch,
                         ValueNetworkMixin, build_tf_policy, compute_gae_for_sample_batch)

TINY_MODEL = {"fcnet_hiddens": [8]}


def actor_critic_loss(policy, model, dist_class, train_batch):
    logits, _ = model.from_batch(train_batch)
    dist = dist_class(logits, model)
    policy.pi_loss = -tf.reduce_mean(dist.logp(train_batch[SampleBatch.ACTIONS]) *
                                     train_batch[SampleBatch.ADVANTAGES])
    policy.vf_loss = tf.reduce_mean(
        tf.square(model.value_function() - train_batch[SampleBatch.VALUE_TARGETS]))
    policy.entropy = tf.reduce_mean(dist.entropy())
    return policy.pi_loss + 0.5 * policy.vf_loss - policy.entropy_coeff * policy.entropy


def actor_critic_stats(policy, train_batch):
    return {"pi_loss": policy.pi_loss, "vf_loss": policy.vf_loss, "entropy": policy.entropy}


ActorCriticPolicy = build_tf_policy(
    "ActorCriticPolicy",
    loss_fn=actor_critic_loss,
    stats_fn=actor_critic_stats,
    postprocess_fn=compute_gae_for_sample_batch,
    # the keys compute_gae_for_sample_batch and EntropyCoeffSchedule read have no defaults of
    # their own: a policy declares them, as A3C's and PPO's DEFAULT_CONFIG do
    get_default_config=lambda: {"lambda": 0.95, "gamma": 0.9, "use_gae": True, "use_critic": True,
                                "entropy_coeff": 0.0, "model": TINY_MODEL},
    mixins=[ValueNetworkMixin, LearningRateSchedule, EntropyCoeffSchedule],
)


def cartpole_spaces():
    env = gym.make("CartPole-v1")
    return env.observation_space, env.action_space


def random_fragment(n=12, seed=0, terminated_at_end=False, truncated_at_end=False):
    """A single-episode CartPole-shaped fragment with vf_preds (as a rollout would have)."""
    rng = np.random.default_rng(seed)
    terminateds = np.zeros(n, bool)
    truncateds = np.zeros(n, bool)
    terminateds[-1] = terminated_at_end
    truncateds[-1] = truncated_at_end
    return SampleBatch({
        SampleBatch.OBS: rng.normal(size=(n, 4)).astype(np.float32),
        SampleBatch.NEXT_OBS: rng.normal(size=(n, 4)).astype(np.float32),
        SampleBatch.ACTIONS: rng.integers(0, 2, n),
        SampleBatch.REWARDS: np.ones(n, np.float32),
        SampleBatch.TERMINATEDS: terminateds,
        SampleBatch.TRUNCATEDS: truncateds,
        SampleBatch.EPS_ID: np.zeros(n, np.int64),
        SampleBatch.VF_PREDS: rng.normal(size=n).astype(np.float32),
    })
