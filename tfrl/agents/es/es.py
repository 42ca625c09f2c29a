"""ES trainer: evolution strategies (Salimans et al., 2017) on Ray, with an aggregation tree.

The driver holds the flat policy parameters, the observation filter and Adam. Each iteration it
puts the parameters once in the object store; `ESWorker` actors (es_worker.py) evaluate
antithetic perturbations drawn from the shared noise table (noise_table.py); the returns are
shaped by centered ranks (fitness.py) and reduced to one update direction, either at the driver
(flat) or through a tree of aggregator actors (aggregation.py), so that with the tree the
driver's inbound traffic does not grow with the number of workers. The driver then takes an
Adam step on -direction / (2N) + l2_coeff * params and sends the merged filter to the workers.

`result["info"]["driver_bytes_received"]` is what reached the driver in the iteration.
ARS (tfrl/agents/ars) is this trainer with another shaping and plain SGD.
"""
from __future__ import annotations

import collections
from typing import Any, Dict

import numpy as np

from tfrl import errors
from tfrl.agents.es.aggregation import Aggregator, build_tree, received_size
from tfrl.agents.es.config import DEFAULT_CONFIG
from tfrl.agents.es.es_policy import ESPolicy
from tfrl.agents.es.es_worker import ESWorker, InProcessActor
from tfrl.agents.es.noise_table import make_noise
from tfrl.agents.es.optimizers import Adam
from tfrl.trainer import DEFAULT_POLICY_ID, Trainer
from tfrl.tune import trial_base


def validate_config(config: dict) -> None:
    """ES/ARS settings check.

    Raises:
      InvalidConfigError: a count below its minimum, a noise_stdev or stepsize that is not
        positive, an eval_prob outside [0, 1], more aggregators than (remote) workers, or
        evaluation_interval (ES evaluates with eval_prob instead).
    """
    for key, low in (("num_workers", 0), ("perturbations_per_round", 1), ("episodes_per_batch", 1),
                     ("train_batch_size", 0), ("num_aggregators", 0), ("aggregation_fan_in", 2),
                     ("report_length", 1), ("noise_size", 1)):
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise errors.InvalidConfigError(f"{key} must be an integer >= {low}, got {value!r}")
    for key in ("noise_stdev", "stepsize"):
        if not isinstance(config[key], (int, float)) or config[key] <= 0:
            raise errors.InvalidConfigError(f"{key} must be a number > 0, got {config[key]!r}")
    if not 0 <= config["eval_prob"] <= 1:
        raise errors.InvalidConfigError(f"eval_prob must be in [0, 1], got {config['eval_prob']!r}")
    if config["num_workers"] and config["num_aggregators"] > config["num_workers"]:
        raise errors.InvalidConfigError(
            f"num_aggregators={config['num_aggregators']} exceeds num_workers="
            f"{config['num_workers']}; use at most one aggregator per worker (0: flat)")
    if config["evaluation_interval"]:
        raise errors.InvalidConfigError(
            "ES and ARS evaluate the unperturbed policy themselves (eval_prob); leave "
            "evaluation_interval unset")


class ESTrainer(Trainer, trial_base()):
    """Evolution strategies; see the module docstring. Subclasses (ARS) change the shaping
    (`shaping_settings`), the optimizer (`make_optimizer`) and the step (`ascent_direction`)."""

    trainer_name = "ES"
    _default_config = DEFAULT_CONFIG

    # --- the parts ARS replaces -------------------------------------------------------------
    def shaping_settings(self) -> Dict[str, Any]:
        return {"shaping": "centered_ranks"}

    def make_optimizer(self, dim: int):
        return Adam(dim, self.config["stepsize"])

    def ascent_direction(self, direction: np.ndarray, num_pairs: int) -> np.ndarray:
        """Salimans et al.: the weighted noise sum over the number of returns."""
        return direction / (2 * num_pairs)

    # --- Trainer ----------------------------------------------------------------------------
    def _init(self, config: dict) -> None:
        import ray

        from tfrl.env.registry import EnvContext, resolve_env_creator
        from tfrl.rollout.filters import make_filter
        from tfrl.runtime import ensure_ray

        validate_config(config)
        ensure_ray(config)
        env = resolve_env_creator(config["env"])(EnvContext(config.get("env_config")))
        self.policy = ESPolicy(env.observation_space, env.action_space, config["model"],
                               seed=config.get("seed") or 0)
        self.observation_filter = make_filter(config["observation_filter"], env.observation_space)
        env.close()
        dim = self.policy.num_params
        self.noise_ref = ray.put(make_noise(config["noise_size"]))
        if config["num_workers"]:
            worker_cls = ray.remote(ESWorker).options(num_cpus=config["num_cpus_per_worker"])
            self.es_workers = [worker_cls.remote(config, self.noise_ref, index + 1)
                               for index in range(config["num_workers"])]
        else:
            # one worker in the driver (what `tfrl rollout` and `tfrl export` build), flat
            self.es_workers = [InProcessActor(ESWorker(config, ray.get(self.noise_ref), 1))]
        self.aggregators = []
        if config["num_aggregators"] and config["num_workers"]:
            self.root, self.aggregators = build_tree(
                self.es_workers, self.noise_ref, dim, config["num_aggregators"],
                config["aggregation_fan_in"])
        else:
            self.root = None
            self.flat_aggregator = Aggregator(self.es_workers, True, ray.get(self.noise_ref), dim)
        self.es_optimizer = self.make_optimizer(dim)
        self.eval_history = collections.deque(maxlen=config["report_length"])
        self.timesteps = 0

    def _train(self) -> dict:
        import ray

        config = self.config
        theta = self.policy.get_flat_weights().astype(np.float64)
        params_ref = ray.put(theta.astype(np.float32))
        settings = dict(self.shaping_settings(), episodes_per_batch=config["episodes_per_batch"],
                        train_batch_size=config["train_batch_size"],
                        perturbations_per_round=config["perturbations_per_round"])
        if self.root is not None:
            out = ray.get(self.root.step.remote([params_ref], settings))
            driver_bytes = received_size(out)
        else:
            out = self.flat_aggregator.step([params_ref], settings)
            driver_bytes = out["bytes_received"]
        stats, num_pairs = out["stats"], out["num_pairs"]
        gradient = self.ascent_direction(out["direction"], num_pairs)
        new_theta = self.es_optimizer.update(theta, -gradient + config["l2_coeff"] * theta)
        self.policy.set_flat_weights(new_theta)
        self._merge_filter(stats["filter_delta"])

        steps = stats["steps"] + stats["eval_steps"]
        self.timesteps += steps
        if stats["eval_episodes"]:
            self.eval_history.append((stats["eval_return_sum"], stats["eval_episodes"],
                                      stats["eval_return_min"], stats["eval_return_max"],
                                      stats["eval_steps"]))
        history = list(self.eval_history)
        episodes = sum(h[1] for h in history)
        return {
            "episode_reward_mean": sum(h[0] for h in history) / episodes if episodes else np.nan,
            "episode_reward_min": min(h[2] for h in history) if history else np.nan,
            "episode_reward_max": max(h[3] for h in history) if history else np.nan,
            "episode_len_mean": sum(h[4] for h in history) / episodes if episodes else np.nan,
            "episodes_this_iter": stats["episodes"] + stats["eval_episodes"],
            "timesteps_this_iter": steps,
            "timesteps_total": self.timesteps,
            "info": {
                "driver_bytes_received": driver_bytes,
                "num_pairs": num_pairs,
                "noisy_return_mean": stats["noisy_return_mean"],
                "noisy_return_max": stats["noisy_return_max"],
                "eval_episodes_this_iter": stats["eval_episodes"],
                "weights_norm": float(np.linalg.norm(new_theta)),
                "update_ratio": float(np.linalg.norm(new_theta - theta)
                                      / max(np.linalg.norm(theta), 1e-12)),
            },
        }

    def _merge_filter(self, delta) -> None:
        """The workers' filter updates of the iteration into the driver's filter, and the merged
        statistics back to every worker (classic synchronize_filters)."""
        import ray

        if delta is None or not hasattr(self.observation_filter, "running_stat"):
            return
        self.observation_filter.running_stat.merge(delta)
        if self.config["synchronize_filters"]:
            ray.get([w.set_filter.remote(self.observation_filter) for w in self.es_workers])

    # --- policy access, export and checkpoints ----------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> ESPolicy:
        return self.policy

    def compute_action(self, observation, policy_id: str = DEFAULT_POLICY_ID, explore: bool = False):
        """The unperturbed policy's action for one raw observation (through the filter)."""
        obs = self.observation_filter(np.asarray(observation)[None], update=False)[0]
        return self.policy.compute_action(obs)

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Writes the policy and its filter statistics as a SavedModel (raw observations in)."""
        self.policy.export_model(export_dir, self.observation_filter.serving_parameters())
        return export_dir

    def get_state(self) -> dict:
        if self._tune_trial:
            return self._trial_call("get_state")
        return {"name": self.trainer_name, "config": self.raw_user_config,
                "iteration": self.iteration, "time_total": self._time_total,
                "timesteps_total": self._timesteps_total, "episodes_total": self._episodes_total,
                "weights": self.policy.get_flat_weights(),
                "filter": self.observation_filter.get_state(),
                "es_optimizer": self.es_optimizer.get_state()}

    def set_state(self, state: dict) -> None:
        """Raises:
          CheckpointError: state lacking a key or with parameters of another size."""
        import ray

        from tfrl.rollout.filters import filter_from_state

        try:
            self.policy.set_flat_weights(state["weights"])
            self.observation_filter = filter_from_state(state["filter"])
            self.es_optimizer.set_state(state["es_optimizer"])
            self.iteration, self._time_total = int(state["iteration"]), float(state["time_total"])
            self._timesteps_total = self.timesteps = int(state["timesteps_total"])
            self._episodes_total = int(state["episodes_total"])
        except (KeyError, TypeError, ValueError, errors.InvalidConfigError) as exc:
            raise errors.CheckpointError(
                f"{self.trainer_name} state does not fit this trainer: {exc}; restore a "
                f"checkpoint written by {self.trainer_name} with the same env and model") from exc
        ray.get([w.set_filter.remote(self.observation_filter) for w in self.es_workers])

    def stop(self) -> None:
        """Ends the worker and aggregator actors (idempotent)."""
        if self._tune_trial:
            return self._trial_call("stop")
        if not self._stopped:
            import ray

            for actor in getattr(self, "aggregators", []) + getattr(self, "es_workers", []):
                if not isinstance(actor, InProcessActor):
                    ray.kill(actor)
        super().stop()
