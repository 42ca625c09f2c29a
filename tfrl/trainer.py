"""Trainer: the driver of a training run (RLlib's classic `Trainer`).

A trainer owns one `WorkerSet` (rollout workers as Ray actors plus a local worker holding the
policy that learns), one replay service (an embedded replay server on a free loopback port, or an
external `replay-server` given by `replay_address`) and one policy optimizer, which owns all
distributed execution. `train()` runs one logical iteration: it asks the optimizer to step until
the iteration's minimums are met, collects episode metrics from the workers and returns RLlib's
classic result dict. Algorithms are declared with `build_trainer` (trainer_template.py).

After every iteration the trainer merges the rollout workers' observation-filter updates into the
driver's filters and sends the merged filters back (`synchronize_filters`), so checkpoints,
`compute_action`, recreated workers and exported models see what the workers saw. With
`evaluation_interval` set it also owns a second WorkerSet, the evaluation workers, which run
`evaluation_num_episodes` episodes with the current weights and filters every
`evaluation_interval` iterations (`evaluation_config` overrides, e.g. `explore: False`); their
metrics go under `result["evaluation"]`.

Checkpoints hold no pickle (the format: checkpoint.py); with `replay_checkpoint` the replay
tables are saved beside the trainer state and reloaded on restore. A trainer class is also a Ray
Tune trainable (tune.py): an instance Tune builds is a trial shell around a plain trainer.
"""
from __future__ import annotations

import copy
import logging
import os
import time
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np

import tree

from tfrl import checkpoint, errors, runtime
from tfrl.config import COMMON_CONFIG, apply_classic_keys, merge_config
from tfrl.logging import TensorBoardLogger
from tfrl.registry import get_trainer_class
from tfrl.rollout import collect_episodes, summarize_episodes
from tfrl.rollout.action_adapter import ActionAdapter
from tfrl.rollout.worker_set import WorkerSet
from tfrl.runtime import configure_tf_threads
from tfrl.serving_export import ExportSettings, export_version
from tfrl.tune import runs_in_trial, trial_base

logger = logging.getLogger(__name__)

DEFAULT_POLICY_ID = "default_policy"



class Trainer:
    """Base class of every algorithm's trainer. Subclasses come from `build_trainer`.

    Args:
      config: overrides of the algorithm's default config. An unknown key raises
        `InvalidConfigError` naming the closest valid key.
      env: environment id or registered name (shortcut for config["env"]).
      logdir: where TensorBoard events, result.json and checkpoints go; None disables logging.
      logger_creator, storage: given only by Ray Tune (`storage`; older Tune versions also pass
        `logger_creator`, which is not used), which builds a trainer class as a trial
        (every trainer class is a `ray.tune.Trainable`, see tfrl/tune.py `trial_base`). That
        instance is a trial shell: Tune's `train`/`save`/`restore`/`stop` run a plain instance
        of the same class inside it.

    A trainer that is never stopped is stopped when the interpreter exits (before Python waits
    for the threads it started), so scripts that never call `stop()` still end.
    """

    trainer_name = "Trainer"  # the registered algorithm name ("PPO"), in checkpoints and logs
    _default_config = COMMON_CONFIG
    _policy = None

    def __init__(self, config: Optional[dict] = None, env: Any = None, logdir: Optional[str] = None,
                 logger_creator: Optional[Callable] = None, storage: Any = None):
        self._tune_trial = logger_creator is not None or storage is not None
        if self._tune_trial:
            trial_base().__init__(self, config=dict(config or {}, **({"env": env} if env else {})),
                                  storage=storage)
            return
        config = dict(config or {})
        if env is not None:
            config["env"] = env
        self.raw_user_config = copy.deepcopy(config)
        self.config = merge_config(self._default_config, config)
        apply_classic_keys(self.config, self.trainer_name)
        if self.config["env"] is None:
            raise errors.InvalidConfigError(
                f"{self.trainer_name}: no environment given; pass env='CartPole-v1' or config['env']")
        self.logdir = logdir
        self.iteration = 0
        self._time_total = 0.0
        self._timesteps_total = 0
        self._episodes_total = 0
        self._tb_logger = None
        self._stopped = False
        self.evaluation_workers = None
        logging.getLogger("tfrl").setLevel(self.config["log_level"])
        if not configure_tf_threads(self.config["driver_tf_threads"]):
            logger.warning(
                "%s: driver_tf_threads=%s not applied: TensorFlow already started in this process "
                "with other thread pools; set it in the first trainer of the process, before "
                "other TensorFlow work", self.trainer_name, self.config["driver_tf_threads"])
        evaluation_config = self._evaluation_config()
        self.export_settings = ExportSettings.from_config(self.config)
        self._export_base = self.export_settings.base_dir(logdir)
        try:
            self._init(self.config)
            if evaluation_config is not None:
                self.evaluation_workers = self._make_evaluation_workers(evaluation_config)
        except BaseException:
            self.stop()  # the rollout workers and replay server built before the failure
            raise
        if logdir is not None:
            self._tb_logger = TensorBoardLogger(logdir)
        runtime.stop_at_exit(self)

    # `iteration` and `logdir` are also read-only properties of ray.tune.Trainable, which every
    # trainer class has last among its bases; these are the trainer's own.
    @property
    def iteration(self) -> int:
        return self._iteration

    @iteration.setter
    def iteration(self, value: int) -> None:
        self._iteration = value

    @property
    def logdir(self) -> Optional[str]:
        return self._logdir

    @logdir.setter
    def logdir(self, value: Optional[str]) -> None:
        self._logdir = value

    # --- to be provided by build_trainer -------------------------------------------------
    def _init(self, config: dict) -> None:
        raise NotImplementedError

    def _train(self) -> dict:
        raise NotImplementedError

    # --- the public API ----------------------------------------------------------------------
    @runs_in_trial
    def train(self) -> dict:
        """Runs one logical training iteration and returns the result dict.

        After the iteration the workers' observation filters are synchronised (see the module
        docstring) and, every `evaluation_interval` iterations, the evaluation workers run their
        episodes; their metrics are under `result["evaluation"]`. Every `export_every`
        iterations the policy is exported as `<export_dir>/<iteration>/` (tfrl/serving_export.py)
        and `result["export_path"]` says where.
        """
        start = time.time()
        workers = getattr(self, "workers", None)
        failures_before = workers.num_worker_failures if workers is not None else 0
        result = self._train()
        if self.config["synchronize_filters"]:
            self._sync_filters()
        if workers is not None:
            self._report_worker_failures(result, workers.num_worker_failures - failures_before)
        self.iteration += 1
        interval = self.config["evaluation_interval"]
        if self.evaluation_workers is not None and self.iteration % interval == 0:
            result["evaluation"] = self._evaluate()
        if self._export_base and self.iteration % self.export_settings.export_every == 0:
            result["export_path"] = export_version(self, self._export_base, self.iteration)
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
        callbacks = self._train_result_callbacks()
        if callbacks is not None:
            callbacks.on_train_result(trainer=self, result=result)
        if self._tb_logger is not None:
            self._tb_logger.log(result)
        return result

    def _train_result_callbacks(self):
        """The config's callbacks object when it implements on_train_result, else None."""
        if "_train_callbacks" not in self.__dict__:
            from tfrl.rollout.callbacks import make_callbacks, overrides_hook

            callbacks = make_callbacks(self.config.get("callbacks"))
            self._train_callbacks = (callbacks if overrides_hook(callbacks, "on_train_result")
                                     else None)
        return self._train_callbacks

    def _report_worker_failures(self, result: dict, failures: int) -> None:
        """Says in the result and the log when rollout workers failed during this iteration (an
        actor died, e.g. with its node): each was recreated on a live node with the current
        weights and filters, and the samples it had in flight in this iteration are lost;
        the iteration itself completes with the other workers' samples."""
        result["num_worker_failures_this_iter"] = failures
        result["num_worker_failures_total"] = self.workers.num_worker_failures
        if failures:
            logger.warning(
                "%s iteration %d: %d rollout worker failure(s); recreated with the current weights "
                "and filters (%d healthy workers now); the samples in flight on the failed workers "
                "in this iteration are lost", self.trainer_name, self.iteration + 1, failures,
                self.workers.num_healthy_workers())

    def _sync_filters(self) -> None:
        """RLlib's classic filter synchronisation: the workers' filter updates since the last
        call are merged into the driver's (local worker's) filters, the merged filters are sent
        back to every worker and the workers' update buffers are cleared."""
        workers = getattr(self, "workers", None)
        if workers is not None:
            workers.sync_filters()

    # --- evaluation -------------------------------------------------------------------------
    def _evaluation_config(self) -> Optional[dict]:
        """The evaluation workers' config (None without evaluation_interval).

        Raises:
          InvalidConfigError: a bad evaluation_interval, evaluation_num_episodes or
            evaluation_num_workers, an unknown key in evaluation_config, or an evaluation
            input other than 'sampler'.
        """
        config = self.config
        interval = config["evaluation_interval"]
        if interval in (None, 0):
            return None
        custom = config["custom_eval_function"]
        if custom is not None and not callable(custom):
            raise errors.InvalidConfigError(
                "custom_eval_function must be None or a function (trainer, evaluation_workers) "
                f"-> metrics dict, got {custom!r}")
        for key, low in (("evaluation_interval", 1), ("evaluation_num_episodes", 1),
                         ("evaluation_num_workers", 0)):
            value = config[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise errors.InvalidConfigError(
                    f"{key} must be an integer >= {low}, got {value!r}")
        overrides = dict(config["evaluation_config"] or {})
        for key in ("evaluation_config", "evaluation_interval"):
            if key in overrides:
                raise errors.InvalidConfigError(
                    f"evaluation_config cannot set {key!r}; set it in the trainer's config")
        evaluation = merge_config(config, overrides, path="evaluation_config.")
        if "output" not in overrides:
            evaluation["output"] = None  # evaluation episodes are not recorded unless asked
        # evaluation plays episodes in the env, whatever the training workers read
        evaluation["input"] = overrides.get("input", "sampler")
        evaluation["input_evaluation"] = []
        if evaluation["input"] != "sampler":
            raise errors.InvalidConfigError(
                "evaluation_config: evaluation workers play episodes in the env, so their input "
                f"must be 'sampler', got {evaluation['input']!r}; judge recorded episodes with "
                "input_evaluation instead")
        # whole episodes, one at a time per env: each sample() call ends at least one episode
        evaluation.update(batch_mode="complete_episodes", rollout_fragment_length=1,
                          num_workers=config["evaluation_num_workers"])
        return evaluation

    def _make_evaluation_workers(self, evaluation_config: dict):
        return WorkerSet(env_creator=evaluation_config["env"], policy=self.workers.policy_spec,
                         config=evaluation_config,
                         num_workers=evaluation_config["evaluation_num_workers"],
                         default_policy_class=self.workers.default_policy_class)

    def _evaluate(self) -> dict:
        """Runs `evaluation_num_episodes` episodes on the evaluation workers with the trained
        policies' current weights, global vars and filters; returns their metrics. With a
        `custom_eval_function`, that function runs the evaluation and returns the metrics.

        Raises:
          InvalidConfigError: the custom_eval_function returned no dict or an empty one.

        Workers sample in fragments over several envs, so one round can finish more episodes
        than asked for; the metrics cover the first `evaluation_num_episodes` finished, so
        every evaluation averages the same number of episodes."""
        local = self.workers.local_worker()
        evaluation = self.evaluation_workers
        evaluation_local = evaluation.local_worker()
        weights = local.get_movable_weights()
        filters = local.get_filters()
        evaluation_local.set_weights(weights, dict(local.global_vars))
        evaluation_local.set_filters(filters)
        remote = evaluation.remote_workers()
        if remote:
            evaluation.sync_weights(global_vars=dict(local.global_vars))
            evaluation.call_remote_workers("set_filters", filters)
        custom = self.config["custom_eval_function"]
        if custom is not None:
            metrics = custom(self, evaluation)
            if not isinstance(metrics, dict) or not metrics:
                raise errors.InvalidConfigError(
                    f"custom_eval_function {getattr(custom, '__name__', custom)!r} must return a "
                    f"non-empty dict of metrics, got {metrics!r:.200}")
            return metrics
        episodes = []
        wanted = self.config["evaluation_num_episodes"]
        while len(episodes) < wanted:
            if remote:
                # only the count comes back: the evaluation batches are not needed
                evaluation.foreach_worker(lambda w: w.sample().count, local_worker=False)
                episodes.extend(collect_episodes(None, evaluation.remote_workers()))
            else:
                evaluation_local.sample()
                episodes.extend(evaluation_local.get_metrics())
        episodes = episodes[:wanted]
        metrics = summarize_episodes(episodes)
        metrics["num_episodes"] = len(episodes)
        return metrics

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID):
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """{policy_id: weights} (numpy) of `policies` (default: all), from the local worker,
        whose policies are the ones that learn (classic RLlib's `Trainer.get_weights`)."""
        return self.workers.local_worker().get_weights(policies)

    def set_weights(self, weights: Dict[str, Any]) -> None:
        """Sets the weights of the policies in `weights` (as `get_weights` returns them) on the
        local worker and sends them to the remote workers, so the next samples use them
        (classic RLlib's `Trainer.set_weights` set only the local worker's).

        Raises:
          InvalidConfigError: a policy id in `weights` that this trainer does not have.
        """
        self.workers.local_worker().set_weights(weights)
        self.workers.sync_weights(list(weights))

    def compute_action(self, observation, policy_id: str = DEFAULT_POLICY_ID, explore: bool = False):
        """The action the policy takes for one raw observation: the observation goes through the
        trained (synchronised) filter, and Box actions are adapted as rollout workers send them
        to their envs (clipped to the bounds with clip_actions, rescaled with normalize_actions).
        """
        policy = self.get_policy(policy_id)
        local = self.workers.local_worker()
        obs = local.filter_observation(observation, policy_id)
        actions, _, _ = policy.compute_actions(_batch_of_one(obs, policy.observation_space),
                                               explore=explore)
        adapter = ActionAdapter(policy.action_space, local.env_name,
                                clip_actions=self.config["clip_actions"],
                                normalize_actions=self.config["normalize_actions"], check=False)
        actions = adapter(actions)
        if isinstance(actions, (dict, tuple)):  # a Dict/Tuple action space's nest of batches
            return tree.map_structure(lambda leaf: leaf[0], actions)
        return actions[0]  # an array, or a list of rows (as classic custom policies return)

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID) -> str:
        """Writes the policy as a SavedModel for serving (plain `tf.saved_model.load` reads it).

        Its serving signature takes raw observations: the observation filter's current
        statistics are part of the model, and Box actions come out as the env receives them
        (clipped with clip_actions, rescaled with normalize_actions), like `compute_action`.
        """
        local = self.workers.local_worker()
        self.get_policy(policy_id).export_model(
            export_dir, observation_filter=local.filters[policy_id].serving_parameters(),
            clip_actions=bool(self.config["clip_actions"]),
            normalize_actions=bool(self.config["normalize_actions"]))
        return export_dir

    # --- checkpoints ------------------------------------------------------------------------
    @runs_in_trial
    def get_state(self) -> dict:
        """Counters, the driver worker's state (weights, optimizer slots, filters) and the
        optimizer's counters, as plain data (nested dicts and lists, numbers, numpy arrays)."""
        return {
            "name": self.trainer_name,
            "config": self.raw_user_config,
            "iteration": self.iteration,
            "time_total": self._time_total,
            "timesteps_total": self._timesteps_total,
            "episodes_total": self._episodes_total,
            "worker": self.workers.local_worker().save(),
            "optimizer": self.optimizer.save(),
        }

    def set_state(self, state: dict) -> None:
        """Restores `get_state()`'s output (as `load_checkpoint_state` returns it); when it
        names a replay checkpoint (`replay_checkpoint_path`), the embedded replay tables are
        reloaded from it.

        Raises:
          CheckpointError: state that does not fit this trainer (other policies or model
            config), or an unreadable replay checkpoint.
        """
        try:
            counters = (int(state["iteration"]), float(state["time_total"]),
                        int(state["timesteps_total"]), int(state["episodes_total"]))
            worker_state, optimizer_state = state["worker"], state["optimizer"]
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.CheckpointError(
                f"trainer state lacks or has a malformed {exc}; pass what get_state() or "
                "load_checkpoint_state() returned") from exc
        self.workers.local_worker().restore(worker_state)
        replay_path = state.get("replay_checkpoint_path")
        if replay_path is not None and getattr(self, "replay", None) is not None:
            self.replay.load_checkpoint(replay_path)
        self.optimizer.restore(optimizer_state)
        self.iteration, self._time_total, self._timesteps_total, self._episodes_total = counters
        self.workers.sync_weights()
        # the restored filters replace the remote workers' ones (their buffers are cleared)
        if self.workers.num_remote_workers():
            self.workers.call_remote_workers("set_filters", self.workers.local_worker().get_filters())

    @runs_in_trial
    def save(self, checkpoint_dir: Optional[str] = None) -> str:
        """Writes a checkpoint and returns the path of its state file:
        `<dir>/checkpoint_<iteration>/trainer_state.json` (with `trainer_state.npz` beside it).

        With `replay_checkpoint: True` the replay tables (items, priorities, counters) are
        saved too: an embedded server's under `checkpoint_<iteration>/replay/`; an external
        server writes its own checkpoint (in its --checkpoint-dir) and the state records where.

        Config values that are not data (functions, classes, spaces) cannot be stored; they are
        left out and listed under `unstored_config_keys` (`restore()` into a trainer built with
        the full config does not need them).

        Raises:
          CheckpointError: the directory cannot be written.
          replay.errors.FailedPreconditionError: an external replay server without
            --checkpoint-dir, with replay_checkpoint set.
        """
        base = checkpoint_dir or os.path.join(self.logdir or ".", "checkpoints")
        path = os.path.join(base, f"checkpoint_{self.iteration:06d}")
        replay = getattr(self, "replay", None) if self.config["replay_checkpoint"] else None
        return checkpoint.write_checkpoint(path, self.get_state(), replay)

    @staticmethod
    def load_checkpoint_state(checkpoint_path: str) -> dict:
        """Reads a checkpoint written by `save` (its directory or its state file) without
        unpickling anything: the state as `set_state` takes it, plus `unstored_config_keys` and,
        when the checkpoint holds embedded replay tables, `replay_checkpoint_path`.

        Raises:
          PickleCheckpointError: a pickle checkpoint of an older version (trainer_state.pkl);
            it is not opened.
          CheckpointError: no checkpoint at that path, or files that are not a tfrl checkpoint.
        """
        return checkpoint.load_checkpoint_state(checkpoint_path)

    @classmethod
    def from_checkpoint(cls, checkpoint_path: str, **config_overrides) -> "Trainer":
        """A trainer of the checkpoint's algorithm, built with its stored config updated by
        `config_overrides`, with the checkpoint restored (what `tfrl rollout/export` use).

        Raises:
          CheckpointError: as `load_checkpoint_state`, or a config that needed values the
            checkpoint could not store (build the trainer in Python and call `restore`).
        """
        state = cls.load_checkpoint_state(checkpoint_path)
        missing = [k for k in state["unstored_config_keys"]
                   if k.split(".")[1] not in config_overrides]
        if missing:
            raise errors.CheckpointError(
                f"the checkpoint's config held values that are not data ({missing}: functions, "
                "classes or spaces), which a checkpoint does not store; build the trainer in "
                "Python with the full config and call trainer.restore(path)")
        config = dict(state["config"])
        config.update(config_overrides)
        trainer = get_trainer_class(state["name"])(config=config)
        try:
            trainer.set_state(state)
        except BaseException:
            trainer.stop()
            raise
        return trainer

    @runs_in_trial
    def restore(self, checkpoint_path: str) -> None:
        """Restores weights, optimizer state, filters, counters and (when saved) the replay
        tables from `save()`'s output.

        Raises:
          PickleCheckpointError, CheckpointError: see `load_checkpoint_state` and `set_state`.
        """
        self.set_state(self.load_checkpoint_state(checkpoint_path))

    @runs_in_trial
    def stop(self) -> None:
        """Stops the rollout workers, the optimizer and the replay service (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        for closer in (getattr(self, "optimizer", None), getattr(self, "workers", None),
                       getattr(self, "evaluation_workers", None), getattr(self, "replay", None)):
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
        config = getattr(self, "config", None) or {}
        return f"{self.trainer_name}(env={config.get('env')!r}, iteration={getattr(self, '_iteration', 0)})"


def learner_policies(trainer) -> list:
    """(policy_id, policy) pairs of every policy copy whose loss learns: the local worker's,
    plus any copies the optimizer keeps on its devices (`optimizer.learner_policies()`).

    What trainer hooks that change the learning policies use (PPO's KL coefficient update,
    DQN's target network updates).
    """
    worker = trainer.workers.local_worker()
    pairs = [(pid, worker.get_policy(pid)) for pid in worker.policies_to_train]
    own = getattr(trainer.optimizer, "learner_policies", None)
    if callable(own):
        pairs += [pair for pair in own().items() if all(pair[1] is not p for _, p in pairs)]
    return pairs


TrainerHook = Callable[[Trainer], None]


def sync_target_networks(trainer) -> None:
    """Hard-copies the online weights into the target networks of every learning policy copy
    (an `after_init` hook of the trainers whose policies have target networks: DQN, Ape-X, DDPG,
    TD3, SAC).

    Runs once after the optimizer is built: the optimizer swaps its own learner copy of the
    policy into the local worker and copies the worker's online weights into it, so without this
    the learner's target networks would still hold that copy's unrelated random initialisation
    until the first target update.
    """
    for _, policy in learner_policies(trainer):
        policy.update_target(tau=1.0)


def _batch_of_one(observation, observation_space):
    """One raw observation as a batch of one: for a Dict/Tuple space, a nest of batches."""
    import gymnasium

    if isinstance(observation_space, (gymnasium.spaces.Tuple, gymnasium.spaces.Dict)):
        return tree.map_structure(lambda leaf: np.asarray(leaf)[None], observation)
    return np.asarray(observation)[None]
