"""A policy class is constructible in a fresh Ray actor from (class, spaces, config)."""
import gymnasium as gym
import numpy as np
import pytest


@pytest.mark.timeout(180)
def test_policy_built_in_a_ray_actor_matches_local_copy(ray_session):
    import tensorflow as tf

    from tfrl.policy import SampleBatch, build_tf_policy

    def loss(policy, model, dist_class, batch):  # defined here: pickled by value
        logits, _ = model.from_batch(batch)
        return -tf.reduce_mean(dist_class(logits, model).logp(batch[SampleBatch.ACTIONS]))

    policy_class = build_tf_policy("RayTestPolicy", loss_fn=loss)
    env = gym.make("CartPole-v1")
    config = {"model": {"fcnet_hiddens": [8]}, "seed": 0}

    @ray_session.remote(num_cpus=1)
    class Holder:
        def __init__(self, cls, obs_space, action_space, cfg):
            self.policy = cls(obs_space, action_space, cfg)

        def greedy(self, obs):
            return self.policy.compute_actions(obs, explore=False)[0]

        def get_weights(self):
            return self.policy.get_weights()

        def set_weights(self, weights):
            self.policy.set_weights(weights)

    holder = Holder.remote(policy_class, env.observation_space, env.action_space, config)
    local = policy_class(env.observation_space, env.action_space, config)
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32) * 3
    ray_session.get(holder.set_weights.remote(ray_session.put(local.get_weights())))
    remote_actions = ray_session.get(holder.greedy.remote(obs))
    np.testing.assert_array_equal(remote_actions, local.compute_actions(obs, explore=False)[0])
    for a, b in zip(ray_session.get(holder.get_weights.remote()), local.get_weights()):
        np.testing.assert_array_equal(a, b)
