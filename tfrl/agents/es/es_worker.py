"""ESWorker: a Ray actor that evaluates antithetic perturbations of the flat policy parameters.

Each worker owns one gymnasium env, an `ESPolicy`, an observation filter and a view of the
shared noise table (the array from the object store, not a copy). `do_rollouts(params, n)`
plays n antithetic pairs: for a random offset i it plays one episode with params + sigma *
noise[i] and one with params - sigma * noise[i]. It returns only the offsets, the pairs' returns
and lengths, the unperturbed evaluation episodes' summary and the filter's updates since the
last call, never a parameter vector. Workers are used by ES and ARS alike (tfrl/agents/ars).
With `num_workers: 0` one worker runs in the driver behind `InProcessActor`.
"""
from __future__ import annotations

import types
from typing import Any, Dict, Optional

import numpy as np

from tfrl.agents.es.es_policy import ESPolicy, rollout
from tfrl.agents.es.noise_table import SharedNoiseTable
from tfrl.env.registry import EnvContext, resolve_env_creator
from tfrl.rollout.filters import make_filter


def empty_stats() -> Dict[str, Any]:
    """The per-iteration summary one worker, aggregator or the driver adds up."""
    return {"steps": 0, "episodes": 0, "eval_steps": 0, "eval_episodes": 0,
            "eval_return_sum": 0.0, "eval_return_min": np.inf, "eval_return_max": -np.inf,
            "filter_delta": None}


def merge_stats(total: Dict[str, Any], part: Dict[str, Any]) -> Dict[str, Any]:
    """Adds `part` into `total` (filter updates merged exactly, see filters.RunningStat)."""
    for key in ("steps", "episodes", "eval_steps", "eval_episodes", "eval_return_sum"):
        total[key] += part[key]
    total["eval_return_min"] = min(total["eval_return_min"], part["eval_return_min"])
    total["eval_return_max"] = max(total["eval_return_max"], part["eval_return_max"])
    if part["filter_delta"] is not None:
        if total["filter_delta"] is None:
            total["filter_delta"] = part["filter_delta"].copy()
        else:
            total["filter_delta"].merge(part["filter_delta"])
    return total


class ESWorker:
    """Args:
      config: the trainer's config (env, env_config, model, noise_stdev, eval_prob,
        episode_horizon, action_noise_std, observation_filter, seed).
      noise: the shared noise array (Ray resolves the object-store reference to it).
      worker_index: 1-based, seeds the worker's random stream (with config["seed"]).
    """

    def __init__(self, config: dict, noise: np.ndarray, worker_index: int):
        self.config = config
        creator = resolve_env_creator(config["env"])
        self.env = creator(EnvContext(config.get("env_config"), worker_index=worker_index,
                                      num_workers=config["num_workers"]))
        self.policy = ESPolicy(self.env.observation_space, self.env.action_space, config["model"])
        self.filter = make_filter(config["observation_filter"], self.env.observation_space)
        self.noise = SharedNoiseTable(noise)
        seed = config.get("seed")
        self.rng = np.random.default_rng(None if seed is None else [int(seed), worker_index])

    def do_rollouts(self, params: np.ndarray, num_pairs: int) -> Dict[str, Any]:
        """Plays `num_pairs` antithetic pairs around `params`, then (with probability eval_prob)
        one unperturbed episode. Returns offsets [n], returns [n, 2] (r+, r-), lengths [n, 2]
        and `stats` (see empty_stats), whose filter updates are then forgotten here."""
        config = self.config
        dim, sigma = self.policy.num_params, config["noise_stdev"]
        horizon = config["episode_horizon"]
        action_noise = config["action_noise_std"]
        params = np.asarray(params, np.float32)
        offsets = np.zeros(num_pairs, np.int64)
        returns = np.zeros((num_pairs, 2), np.float64)
        lengths = np.zeros((num_pairs, 2), np.int64)
        for pair in range(num_pairs):
            offsets[pair] = self.noise.sample_offset(self.rng, dim)
            perturbation = sigma * self.noise.get(int(offsets[pair]), dim)
            for side, sign in enumerate((1.0, -1.0)):
                self.policy.set_flat_weights(params + sign * perturbation)
                returns[pair, side], lengths[pair, side] = rollout(
                    self.policy, self.env, self.filter, horizon, self.rng, update_filter=True,
                    action_noise_std=action_noise)
        stats = empty_stats()
        stats.update(steps=int(lengths.sum()), episodes=2 * num_pairs)
        if self.rng.random() < config["eval_prob"]:
            self.policy.set_flat_weights(params)
            total, length = rollout(self.policy, self.env, self.filter, horizon, self.rng,
                                    update_filter=False)
            stats.update(eval_steps=length, eval_episodes=1, eval_return_sum=total,
                         eval_return_min=total, eval_return_max=total)
        delta: Optional[Any] = getattr(self.filter, "delta", None)
        stats["filter_delta"] = None if delta is None else delta.copy()
        self.filter.clear_buffer()
        return {"offsets": offsets, "returns": returns, "lengths": lengths, "stats": stats}

    def set_filter(self, observation_filter) -> None:
        """Takes the driver's merged filter statistics (the local updates were reported)."""
        self.filter.sync(observation_filter)


class InProcessActor:
    """An object of the driver process called like a Ray actor handle: `handle.method.remote(
    *args)` runs the method at once and returns an object reference to its result (arguments
    that are object references are resolved first, as Ray does for actor calls). It lets the
    aggregation code drive an in-driver worker (`num_workers: 0`) like remote ones."""

    def __init__(self, target: Any):
        self.target = target

    def __getattr__(self, name: str):
        import ray

        method = getattr(self.target, name)

        def remote(*args, **kwargs):
            args = [ray.get(a) if isinstance(a, ray.ObjectRef) else a for a in args]
            return ray.put(method(*args, **kwargs))

        return types.SimpleNamespace(remote=remote)
