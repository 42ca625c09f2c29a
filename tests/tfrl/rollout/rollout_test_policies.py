"""Small real policies (and a crashing env) for the rollout tests, built with build_tf_policy.

Ray actors cannot import test modules, so this module is registered with cloudpickle to be
shipped by value (see conftest.py).
"""
import os
import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.errors import UnsupportedSpaceError
from tfrl.policy import SampleBatch, build_tf_policy, compute_gae_for_sample_batch

SMALL_MODEL = {"fcnet_hiddens": [16, 16]}


def pg_loss(policy, model, dist_class, train_batch):
    logits, _ = model({SampleBatch.OBS: train_batch[SampleBatch.OBS]}, None, None)
    logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
    return -tf.reduce_mean(logp * train_batch[SampleBatch.ADVANTAGES])


def pg_defaults():
    return {"model": dict(SMALL_MODEL), "lr": 0.01, "gamma": 0.99, "lambda": 1.0, "use_gae": True,
            "use_critic": True}


PGPolicy = build_tf_policy("PGPolicy", loss_fn=pg_loss,
                           postprocess_fn=compute_gae_for_sample_batch,
                           get_default_config=pg_defaults)


def discrete_actions_only(policy, observation_space, action_space, config):
    import gymnasium

    if not isinstance(action_space, gymnasium.spaces.Discrete):
        raise UnsupportedSpaceError(f"DiscretePGPolicy needs a Discrete action space, got {action_space}")


DiscretePGPolicy = build_tf_policy("DiscretePGPolicy", loss_fn=pg_loss,
                                   postprocess_fn=compute_gae_for_sample_batch,
                                   get_default_config=pg_defaults,
                                   validate_spaces=discrete_actions_only)


def add_priorities(policy, sample_batch, other_agent_batches=None, episode=None):
    batch = compute_gae_for_sample_batch(policy, sample_batch, other_agent_batches, episode)
    batch["priorities"] = (np.abs(batch[SampleBatch.ADVANTAGES]) + 0.5).astype(np.float32)
    return batch


PrioritizedPGPolicy = build_tf_policy("PrioritizedPGPolicy", loss_fn=pg_loss,
                                      postprocess_fn=add_priorities, get_default_config=pg_defaults)


def crash_once_env(env_config):
    """CartPole whose first step crashes in whichever worker removes the marker file first."""
    env = gym.make("CartPole-v1")
    marker = env_config["marker"]
    original_step = env.step

    def step(action):
        try:
            os.remove(marker)
        except FileNotFoundError:
            return original_step(action)
        raise RuntimeError("physics engine exploded")

    env.step = step
    return env


def slow_env(env_config):
    """CartPole whose steps take `step_seconds` of waiting (a simulator's time, not this CPU's)."""
    env = gym.make("CartPole-v1")
    original_step = env.step

    def step(action):
        time.sleep(env_config["step_seconds"])
        return original_step(action)

    env.step = step
    return env


def local_only_env(env_config):
    """CartPole that cannot be built on a remote worker (worker_index > 0)."""
    if env_config.worker_index > 0:
        raise RuntimeError("no simulator licence on remote workers")
    return gym.make("CartPole-v1")


def count_fragment_rows(policy, batch):
    batch["fragment_rows"] = np.full(batch.count, batch.count, np.int64)
    return batch


# marks every row with the number of rows its postprocess_fragment_fn call saw
FragmentPGPolicy = build_tf_policy("FragmentPGPolicy", loss_fn=pg_loss,
                                   postprocess_fn=compute_gae_for_sample_batch,
                                   postprocess_fragment_fn=count_fragment_rows,
                                   get_default_config=pg_defaults)
