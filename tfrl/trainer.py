"""Trainer: the driver of a training run (RLlib's classic `Trainer`).

A trainer owns one `WorkerSet` (rollout workers as Ray actors plus a local worker holding the
policy that learns), one replay service (an embedded replay server on a free loopback port, or an
external `replay-server` given by `replay_address`) and one policy optimizer, which owns all
distributed execution. `train()` runs one logical iteration: it asks the optimizer to step until
the iteration's minimums are met, collects episode metrics from the workers and returns RLlib's
classic result dict. Algorithms are declared with `build_trainer` (trainer_template.py).
"""
from __future__ import annotations

import copy
import logging
import os
import pickle
import time
from typing import Any, Callable, Dict, Optional

import numpy as np

from tfrl import errors
from tfrl.config import merge_config
from tfrl.models.catalog import MODEL_DEFAULTS
from tfrl.runtime import configure_tf_threads

logger = logging.getLogger(__name__)

DEFAULT_POLICY_ID = "default_policy"


COMMON_CONFIG: Dict[str, Any] = {
    # === Environment ===
    "env": None,
    "env_config": {},
    "gamma": 0.99,
    "clip_rewards": None,
    "clip_actions": True,
    "normalize_actions": False,
    "observation_filter": "NoFilter",
    "seed": None,
    # === Rollouts ===
    "num_workers": 2,
    "num_envs_per_worker": 1,
    "rollout_fragment_length": 200,
    "batch_mode": "truncate_episodes",
    "num_cpus_per_worker": 1,
    "num_gpus_per_worker": 0,
    "num_gpus": 0,
    "check_observations": True,
    "check_actions": True,
    "explore": True,
    "callbacks": None,
    "recreate_failed_workers": True,
    # === Learning ===
    "train_batch_size": 200,
    "lr": 1e-4,
    "model": MODEL_DEFAULTS,
    "optimizer": {},
    "num_learner_devices": "auto",
    # === Iterations and metrics ===
    "min_iter_time_s": 0,
    "timesteps_per_iteration": 0,
    "metrics_smoothing_episodes": 100,
    # === Evaluation ===
    "evaluation_interval": None,
    "evaluation_num_episodes": 10,
    "evaluation_config": {},
    # === Multi-agent ===
    "multiagent": {"policies": {}, "policy_mapping_fn": None, "policies_to_train": None},
    # === Infrastructure ===
    "ray_address": None,
    "replay_address": None,
    "replay_checkpoint": False,
    "log_level": "WARN",
    "tf_threads_per_worker": 1,
    # intra- and inter-op threads of TensorFlow in the driver (the learner); None: TF's default
    "driver_tf_threads": None,
}


class Trainer:
    """Base class of every algorithm's trainer. Subclasses come from `build_trainer`.

    Args:
      config: overrides of the algorithm's default config. An unknown key raises
        `InvalidConfigError` naming the closest valid key.
      env: environment id or registered name (shortcut for config["env"]).
      logdir: where TensorBoard events, result.json and checkpoints go; None disables logging.
    """

    _name = "Trainer"
    _default_config = COMMON_CONFIG
    _policy = None

    def __init__(self, config: Optional[dict] = None, env: Any = None, logdir: Optional[str] = None):
        config = dict(config or {})
        if env is not None:
            config["env"] = env
        self.raw_user_config = copy.deepcopy(config)
        self.config = merge_config(self._default_config, config)
        if self.config["env"] is None:
            raise errors.InvalidConfigError(
                f"{self._name}: no environment given; pass env='CartPole-v1' or config['env']")
        self.logdir = logdir
        self.iteration = 0
        self._time_total = 0.0
        self._timesteps_total = 0
        self._episodes_total = 0
        self._tb_logger = None
        self._stopped = False
        logging.getLogger("tfrl").setLevel(self.config["log_level"])
        if not configure_tf_threads(self.config["driver_tf_threads"]):
            logger.warning(
                "%s: driver_tf_threads=%s not applied: TensorFlow already started in this process "
                "with other thread pools; set it in the first trainer of the process, before "
                "other TensorFlow work", self._name, self.config["driver_tf_threads"])
        try:
            self._init(self.config)
        except BaseException:
            self.stop()  # the rollout workers and replay server built before the failure
            raise
        if logdir is not None:
            from tfrl.logging import TensorBoardLogger

            self._tb_logger = TensorBoardLogger(logdir)

    # --- to be provided by build_trainer -------------------------------------------------
    def _init(self, config: dict) -> None:
        raise NotImplementedError

    def _train(self) -> dict:
        raise NotImplementedError

    # --- the public API ----------------------------------------------------------------------
    def train(self) -> dict:
        """Runs one logical training iteration and returns the result dict."""
        start = time.time()
        result = self._train()
        self.iteration += 1
        time_this_iter = time.time() - start
        self._time_total += time_this_iter
        self._timesteps_total = int(result.get("timesteps_total", self._timesteps_total))
        self._episodes_total += int(result.get("episodes_this_iter", 0))
        result.update(
            training_iteration=self.iteration,
            time_this_iter_s=time_this_iter,
            time_total_s=self._time_total,
            episodes_total=self._episodes_total,
            timestamp=time.time(),
            # RLlib's classic keys: the trainer's config (a copy) and Tune's end-of-trial flag
            # (a trainer never ends by itself; stop criteria decide).
            config=dict(self.config),
            done=False,
        )
        if self._tb_logger is not None:
            self._tb_logger.log(result)
        return result

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID):
        return self.workers.local_worker().get_policy(policy_id)

    def compute_action(self, observation, policy_id: str = DEFAULT_POLICY_ID, explore: bool = False):
        policy = self.get_policy(policy_id)
        obs = self.workers.local_worker().filter_observation(observation, policy_id)
        actions, _, _ = policy.compute_actions(np.asarray(obs)[None], explore=explore)
        return actions[0]

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Writes the policy as a SavedModel for serving (plain `tf.saved_model.load` reads it)."""
        self.get_policy(policy_id).export_model(export_dir)
        return export_dir

    # --- checkpoints ------------------------------------------------------------------------
    def get_state(self) -> dict:
        return {
            "name": self._name,
            "config": self.raw_user_config,
            "iteration": self.iteration,
            "time_total": self._time_total,
            "timesteps_total": self._timesteps_total,
            "episodes_total": self._episodes_total,
            "worker": self.workers.local_worker().save(),
            "optimizer": self.optimizer.save(),
        }

    def set_state(self, state: dict) -> None:
        self.iteration = state["iteration"]
        self._time_total = state["time_total"]
        self._timesteps_total = state["timesteps_total"]
        self._episodes_total = state["episodes_total"]
        self.workers.local_worker().restore(state["worker"])
        self.optimizer.restore(state["optimizer"])
        self.workers.sync_weights()

    def save(self, checkpoint_dir: Optional[str] = None) -> str:
        """Writes a checkpoint and returns its path: `<dir>/checkpoint_<iteration>/trainer_state.pkl`.

        The checkpoint is a file our own process wrote (it never comes from the network); it is
        written to a temporary name and renamed, so a crash never leaves a half-written file.
        """
        base = checkpoint_dir or os.path.join(self.logdir or ".", "checkpoints")
        path = os.path.join(base, f"checkpoint_{self.iteration:06d}")
        os.makedirs(path, exist_ok=True)
        state = self.get_state()
        if self.config["replay_checkpoint"] and getattr(self, "replay", None) is not None:
            state["replay_checkpoint"] = self.replay.checkpoint()
        tmp = os.path.join(path, "trainer_state.pkl.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(state, f)
        final = os.path.join(path, "trainer_state.pkl")
        os.replace(tmp, final)
        return final

    @staticmethod
    def load_checkpoint_state(checkpoint_path: str) -> dict:
        """Reads a checkpoint written by `save` (a directory or the state file itself).

        Raises:
          CheckpointError: no checkpoint at that path.
        """
        if os.path.isdir(checkpoint_path):
            checkpoint_path = os.path.join(checkpoint_path, "trainer_state.pkl")
        if not os.path.exists(checkpoint_path):
            raise errors.CheckpointError(
                f"no trainer checkpoint at {checkpoint_path!r}; pass a path printed by `save()` or "
                "`tfrl train` (a checkpoint_NNNNNN directory)")
        with open(checkpoint_path, "rb") as f:
            return pickle.load(f)

    def restore(self, checkpoint_path: str) -> None:
        """Restores weights, optimizer state, filters and counters from `save()`'s output."""
        self.set_state(self.load_checkpoint_state(checkpoint_path))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for closer in (getattr(self, "optimizer", None), getattr(self, "workers", None),
                       getattr(self, "replay", None)):
            if closer is not None:
                try:
                    closer.stop()
                except Exception:  # noqa: BLE001 - stopping must go on for the others
                    logger.exception("error while stopping %r", closer)
        if self._tb_logger is not None:
            self._tb_logger.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    @classmethod
    def default_config(cls) -> dict:
        return copy.deepcopy(cls._default_config)

    def __repr__(self) -> str:
        return f"{self._name}(env={self.config['env']!r}, iteration={self.iteration})"


def with_common_config(extra_config: dict) -> dict:
    """An algorithm's default config: COMMON_CONFIG with the algorithm's own keys added."""
    return merge_config(COMMON_CONFIG, extra_config, allow_new_keys=True)


TrainerHook = Callable[[Trainer], None]
