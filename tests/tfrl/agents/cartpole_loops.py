"""Single-process training loops on CartPole-v1 for the algorithm tests.

A small stand-in for rollout workers and policy optimizers: `EnvLoop` steps a few gymnasium
envs with one batched `compute_actions` call per step and returns postprocessed fragments,
`train_on_policy` runs minibatch SGD epochs over each batch (PG, A2C, PPO), and `train_dqn`
keeps a uniform replay buffer of n-step transitions. Everything is real: real envs, real
policies, real TensorFlow.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl.policy import SampleBatch, concat_samples

COLUMNS = ("obs", "actions", "rewards", "new_obs", "terminateds", "truncateds", "eps_id")


def make_policy(policy_cls, config: Dict, seed: int = 0):
    env = gym.make("CartPole-v1")
    np.random.seed(seed)
    tf.random.set_seed(seed)
    return policy_cls(env.observation_space, env.action_space, dict(config, seed=seed))


class EnvLoop:
    """`num_envs` CartPole envs stepped together; `collect(steps)` returns one postprocessed
    SampleBatch of num_envs * steps rows plus the returns of the episodes that ended."""

    def __init__(self, policy, num_envs: int, seed: int = 0):
        self.policy = policy
        self.envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
        self.obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]
        self.returns = [0.0] * num_envs
        self.episode_ids = list(range(num_envs))
        self.next_episode_id = num_envs
        self.env_steps = 0
        self.finished: List[float] = []

    def collect(self, steps: int):
        rows = [{k: [] for k in COLUMNS} for _ in self.envs]
        extras: List[Dict[str, list]] = [{} for _ in self.envs]
        finished = []
        for _ in range(steps):
            actions, _, extra = self.policy.compute_actions(np.stack(self.obs))
            for i, env in enumerate(self.envs):
                new_obs, reward, terminated, truncated, _ = env.step(int(actions[i]))
                for key, value in zip(COLUMNS, (self.obs[i], actions[i], reward, new_obs,
                                                terminated, truncated, self.episode_ids[i])):
                    rows[i][key].append(value)
                for key, value in extra.items():
                    extras[i].setdefault(key, []).append(value[i])
                self.returns[i] += reward
                if terminated or truncated:
                    finished.append(self.returns[i])
                    self.returns[i] = 0.0
                    new_obs, _ = env.reset()
                    self.episode_ids[i] = self.next_episode_id
                    self.next_episode_id += 1
                self.obs[i] = new_obs
        self.env_steps += steps * len(self.envs)
        self.finished.extend(finished)
        fragments = [self.policy.postprocess_trajectory(SampleBatch({**r, **e}))
                     for r, e in zip(rows, extras)]
        return concat_samples(fragments), finished

    def recent_mean_return(self, window: int = 20) -> float:
        return float(np.mean(self.finished[-window:])) if self.finished else 0.0


def train_on_policy(policy, *, num_envs: int, fragment_length: int, num_sgd_iter: int,
                    minibatch_size: int, max_env_steps: int, target_return: float,
                    seed: int = 0,
                    after_iteration: Optional[Callable] = None, window: int = 20) -> Dict:
    """Sample num_envs * fragment_length steps, then num_sgd_iter shuffled epochs of
    minibatches; stop at `target_return` (mean of the last `window` episodes), at the step
    budget (no wall-clock limit: a loaded machine must not decide the outcome).
    Returns {"env_steps", "seconds", "best", "history"}."""
    rng = np.random.default_rng(seed)
    loop = EnvLoop(policy, num_envs, seed)
    start = time.perf_counter()
    history, best = [], 0.0
    while loop.env_steps < max_env_steps:
        batch, _ = loop.collect(fragment_length)
        stats = []
        for _ in range(num_sgd_iter):
            order = rng.permutation(batch.count)
            for lo in range(0, batch.count - minibatch_size + 1, minibatch_size):
                stats.append(policy.learn_on_batch(batch.take(order[lo:lo + minibatch_size])))
        policy.on_global_var_update({"timestep": loop.env_steps})
        if after_iteration is not None:
            after_iteration(policy, stats)
        mean_return = loop.recent_mean_return(window)
        history.append(mean_return)
        if len(loop.finished) >= window:
            best = max(best, mean_return)
        if len(loop.finished) >= window and mean_return >= target_return:
            break
    return {"env_steps": loop.env_steps, "seconds": time.perf_counter() - start, "best": best,
            "history": history, "episodes": len(loop.finished)}


class UniformReplay:
    """A ring buffer of transitions (the columns the DQN loss reads)."""

    def __init__(self, capacity: int, columns):
        self.capacity = capacity
        self.columns = list(columns)
        self.storage: Dict[str, np.ndarray] = {}
        self.size = 0
        self.cursor = 0

    def add(self, batch: SampleBatch) -> None:
        for i in range(batch.count):
            for key in self.columns:
                value = np.asarray(batch[key][i])
                if key not in self.storage:
                    self.storage[key] = np.zeros((self.capacity, *value.shape), value.dtype)
                self.storage[key][self.cursor] = value
            self.cursor = (self.cursor + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, rng, batch_size: int) -> SampleBatch:
        index = rng.integers(0, self.size, batch_size)
        return SampleBatch({k: v[index] for k, v in self.storage.items()})


def train_dqn(policy, *, num_envs: int, fragment_length: int, train_batch_size: int,
              learning_starts: int, target_update_freq: int, max_env_steps: int,
              target_return: float, train_steps_per_round: int = 1,
              buffer_size: int = 50000, seed: int = 0,
              window: int = 20) -> Dict:
    """DQN with a uniform replay buffer: each round samples num_envs * fragment_length steps,
    then takes train_steps_per_round learn steps; the target network is hard-updated every
    target_update_freq env steps. Same stopping rules and result as train_on_policy."""
    rng = np.random.default_rng(seed)
    loop = EnvLoop(policy, num_envs, seed)
    replay = UniformReplay(buffer_size, policy.loss_input_signature)
    start = time.perf_counter()
    last_target_update = 0
    history, best = [], 0.0
    while loop.env_steps < max_env_steps:
        batch, _ = loop.collect(fragment_length)
        replay.add(batch)
        if loop.env_steps >= learning_starts:
            for _ in range(train_steps_per_round):
                policy.learn_on_batch(replay.sample(rng, train_batch_size))
        if loop.env_steps - last_target_update >= target_update_freq:
            policy.update_target()
            last_target_update = loop.env_steps
        mean_return = loop.recent_mean_return(window)
        history.append(mean_return)
        if len(loop.finished) >= window:
            best = max(best, mean_return)
        if len(loop.finished) >= window and mean_return >= target_return:
            break
    return {"env_steps": loop.env_steps, "seconds": time.perf_counter() - start, "best": best,
            "history": history, "episodes": len(loop.finished)}
