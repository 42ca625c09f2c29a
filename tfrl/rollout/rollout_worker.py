"""RolloutWorker: envs plus policies that produce experience (RLlib's classic policy evaluator).

A worker owns a list of environments, the policies acting in them (a policy map keyed by policy
id, built from its policy specs by policy_specs.py), one observation filter per policy and the
env runner that samples (sampler.py and its siblings, picked by runner_choice.py for the kind of
env: gymnasium, MultiAgentEnv, external, classic RLlib's VectorEnv or BaseEnv; those two are made
once, not num_envs_per_worker times). It runs in the driver as the local worker or inside a Ray
actor (`RolloutWorker.as_remote()`), where WorkerSet (worker_set.py) manages many of them.
`sample()` returns a postprocessed SampleBatch (MultiAgentBatch for multi-agent envs); given a
replay output (replay_output.py) it writes the postprocessed rows straight into a replay table
and returns only counts, so bulk experience never passes through the driver. Its batches come
from an InputReader (the envs, or recorded files with `input`) and with `output` it records them
to files (tfrl/offline/).

Config keys (RLlib classic names; unknown keys are ignored here, the trainer validates them):
num_envs_per_worker, rollout_fragment_length, batch_mode ("truncate_episodes" |
"complete_episodes"), observation_filter ("NoFilter" | "MeanStdFilter"), clip_rewards (None,
True for sign, or a bound), clip_actions, normalize_actions, seed (worker seed = seed +
worker_index; env j of a worker is first reset with worker seed + 10000 * j), callbacks,
env_config, explore, check_observations, check_actions, tf_threads_per_worker, multiagent
({policies, policy_mapping_fn, policies_to_train}). The whole config is also the policy config.
"""
from __future__ import annotations

import logging
import random
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from replay import errors as replay_errors
from tfrl import errors
from tfrl.env.base_env import BaseEnv
from tfrl.env.checks import check_env
from tfrl.env.multi_agent_env import MultiAgentEnv
from tfrl.env.vector_env import VectorEnv
from tfrl.env.horizon import limit_episodes
from tfrl.env.registry import EnvContext, resolve_env_creator
from tfrl.rollout.callbacks import make_callbacks
from tfrl.rollout.classic_preprocessing import ClassicPreprocessingFilter, preprocesses_for, unwrapped_filter
from tfrl.rollout.filters import Filter, filter_from_state, make_filter
from tfrl.rollout.metrics import RolloutMetrics
from tfrl.rollout.policy_specs import (DEFAULT_POLICY_ID, build_policy_map, policy_specs_by_id,
                                       unpack_policy_spec)
from tfrl.rollout.settings import WorkerSettings
from tfrl.runtime import configure_tf_threads

logger = logging.getLogger(__name__)

# seed offset between the envs of one worker: seeds of different workers and envs never collide
ENV_SEED_STRIDE = 10_000


class SampleSummary(dict):
    """What `sample()` returns when the worker writes into a replay table: counts and metrics.

    Keys: env_steps, agent_steps, items_written ({policy_id: items}), episodes (RolloutMetrics of
    the episodes that ended during this call; `get_metrics()` does not report them again).
    """

    @property
    def count(self) -> int:
        return self["env_steps"]

    def env_steps(self) -> int:
        return self["env_steps"]

    def agent_steps(self) -> int:
        return self["agent_steps"]


class RolloutWorker:
    """Envs and policies producing experience, in the driver or in a Ray actor.

    Args:
      env_creator: a gymnasium id, a name registered with tfrl.env.register_env, or a callable
        env_creator(env_config) returning a gymnasium env, a MultiAgentEnv, an ExternalEnv, or
        classic RLlib's VectorEnv or BaseEnv (made once: they bring their own sub-envs).
      policy_spec: a policy class (single policy "default_policy", spaces from the env), or a dict
        policy_id -> (policy_class, observation_space, action_space, config); a None class uses
        `default_policy_class`, None spaces are taken from the env (a multi-agent env's spaces
        of an agent mapped to the policy, else its shared observation_space/action_space).
      config: worker and policy config (see the module docstring).
      worker_index: 0 for the local worker, 1..N for remote ones (changes the seeds).
      num_workers: how many remote workers the WorkerSet has (informational).
      policy_mapping_fn: agent_id -> policy_id (default: config["multiagent"] or the only policy).
      policies_to_train: policy ids that learn (default: all).
      replay_output: a ReplayOutputSpec; when set `sample()` writes into replay and returns a
        SampleSummary.
      default_policy_class: the class for policy specs that give None.

    Raises:
      UnknownEnvError: an unknown env id or name.
      InvalidEnvError: the env lacks reset/step or gymnasium spaces.
      UnsupportedSpaceError: the policy cannot handle the env's spaces, or a policy's declared
        spaces differ from the env's.
      InvalidConfigError: a bad batch_mode, observation_filter, fragment length, or policy spec
        (also one whose None space neither the spec nor the env gives).
      EnvCrashError: the env raised while being created or reset.
    """

    @classmethod
    def as_remote(cls, num_cpus: Optional[float] = None, num_gpus: Optional[float] = None,
                  memory: Optional[int] = None, resources: Optional[dict] = None):
        """The Ray actor class of RolloutWorker with these resource requests."""
        import ray

        options = {"num_cpus": 1 if num_cpus is None else num_cpus,
                   "num_gpus": num_gpus or 0, "max_restarts": 0}
        if memory is not None:
            options["memory"] = memory
        if resources:
            options["resources"] = resources
        return ray.remote(**options)(cls)

    def __init__(self, env_creator: Any, policy_spec: Any, config: Optional[dict] = None, *,
                 worker_index: int = 0, num_workers: int = 0,
                 policy_mapping_fn: Optional[Callable[[Any], str]] = None,
                 policies_to_train: Optional[Sequence[str]] = None,
                 replay_output: Any = None, default_policy_class: Any = None):
        self.config = dict(config or {})
        # the worker's own keys, checked; keys the config lacks take COMMON_CONFIG's values
        self.settings = settings = WorkerSettings.from_config(self.config)
        self.worker_index = worker_index
        self.num_workers = num_workers
        # a worker given only NumpyPolicySpecs (worker_set.py) starts TensorFlow only if a
        # policy later needs its TF copy, which then applies the threads and seed itself
        specs = policy_specs_by_id(policy_spec, settings.multiagent or {})
        uses_tf = any(getattr(unpack_policy_spec(pid, spec, default_policy_class)[0],
                              "needs_tensorflow", True) for pid, spec in specs.items())
        if worker_index > 0 and uses_tf:
            configure_tf_threads(settings.tf_threads_per_worker)
        self.env_creator = resolve_env_creator(env_creator)
        self.env_name = self.env_creator.name
        self.callbacks = make_callbacks(settings.callbacks)
        self.worker_seed = None
        if settings.seed is not None:
            self.worker_seed = settings.seed + worker_index
            self._seed_libraries(self.worker_seed, uses_tf)

        env_config = dict(settings.env_config or {})
        self.env = self._make_env(env_config, 0)
        # classic RLlib's VectorEnv and BaseEnv bring their own sub-envs: no more copies
        polled = isinstance(self.env, BaseEnv)
        copies = 1 if polled or isinstance(self.env, VectorEnv) else settings.num_envs_per_worker
        self.envs = [self.env] + [self._make_env(env_config, j) for j in range(1, copies)]
        self.multi_agent = isinstance(self.env, MultiAgentEnv)

        # a partial multiagent dict is allowed: see WorkerSettings.multiagent
        multiagent = dict(settings.multiagent or {})
        self.policy_map, self.policy_mapping_fn = build_policy_map(
            policy_spec, env=self.env, env_name=self.env_name,
            multi_agent=self.multi_agent or polled, config=self.config, multiagent=multiagent,
            worker_seed=self.worker_seed, policy_mapping_fn=policy_mapping_fn,
            default_policy_class=default_policy_class)
        if polled:  # multi-agent unless the default policy alone acts (classic RLlib's rule)
            self.multi_agent = set(self.policy_map) != {DEFAULT_POLICY_ID}
        to_train = policies_to_train if policies_to_train is not None else multiagent.get(
            "policies_to_train")
        self.policies_to_train = list(to_train) if to_train else list(self.policy_map)
        self.filters = {pid: self._with_preprocessing(
            pid, make_filter(settings.observation_filter, policy.observation_space))
            for pid, policy in self.policy_map.items()}
        self.runner = self._make_runner()
        if (settings.jit_compile_actions == "auto" and worker_index > 0 and not self.multi_agent
                and not polled and not getattr(self.runner, "uses_numpy_actions", False)):
            # a remote worker steps the same number of envs every time: one XLA compile serves
            for policy in self.policy_map.values():
                if hasattr(policy, "compile_actions_with_xla"):
                    policy.compile_actions_with_xla(True)
        self._metrics_stash: List[RolloutMetrics] = []
        self._setup_offline_data()
        self.replay_output = None
        self.set_replay_output(replay_output)
        self.global_vars: Dict[str, Any] = {"timestep": 0}
        self.num_steps_sampled = 0

    # --- construction -------------------------------------------------------------------
    def _seed_libraries(self, seed: int, uses_tf: bool = True) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        if uses_tf:
            import tensorflow as tf

            tf.random.set_seed(seed)

    def _env_seed(self, j: int) -> Optional[int]:
        return None if self.worker_seed is None else self.worker_seed + ENV_SEED_STRIDE * j

    def _make_env(self, env_config: dict, j: int):
        try:
            env = self.env_creator(EnvContext(env_config, worker_index=self.worker_index,
                                              vector_index=j, num_workers=self.num_workers))
        except errors.TfrlError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing creator becomes one named error
            raise errors.EnvCrashError(
                f"creating env {self.env_name!r} raised {type(exc).__name__}: {exc}") from exc
        check_env(env, self.env_name)
        settings = self.settings
        env = limit_episodes(env, self.env_name, settings.horizon, settings.soft_horizon,
                             settings.no_done_at_end)
        seed = self._env_seed(j)
        if seed is not None and hasattr(env, "action_space") and hasattr(env.action_space, "seed"):
            env.action_space.seed(seed)
        if seed is not None and isinstance(env, (VectorEnv, BaseEnv)) \
                and callable(getattr(env, "seed", None)):
            env.seed(seed)  # classic RLlib's env.seed: their runners reset them unseeded
        return env

    def known_agent_ids(self) -> list:
        """The agent ids of a multi-agent env: its `possible_agents`, else the keys of its
        `observation_spaces`, else (a classic env declares neither) the agents seen so far."""
        env = self.env
        declared = (getattr(env, "possible_agents", None)
                    or list(getattr(env, "observation_spaces", None) or {}))
        return list(declared) or list(getattr(self.runner, "seen_agent_ids", ()))

    def _make_runner(self):
        from tfrl.rollout.runner_choice import make_runner

        return make_runner(self, [self._env_seed(j) for j in range(len(self.envs))])

    def _setup_offline_data(self) -> None:
        """The input reader, off-policy estimators and output writer of the offline keys."""
        from tfrl.offline.sources import make_input_reader
        from tfrl.offline.off_policy_estimator import make_estimators
        from tfrl.offline.recording import make_output_writer
        from tfrl.offline.settings import OfflineSettings

        self.offline_settings = offline = OfflineSettings.from_config(self.config)
        self.input_reader = make_input_reader(
            offline, lambda: self.runner.sample(explore=self.settings.explore),
            self.worker_index, self.num_workers, self.settings.seed)
        self.estimators = []
        if offline.reads_files and offline.input_evaluation and not self.multi_agent:
            policy = self.policy_map[next(iter(self.policy_map))]
            self.estimators = make_estimators(offline.input_evaluation, policy,
                                              offline.gamma)
        self.output_writer = make_output_writer(offline, self.worker_index)

    def _prepare_recorded(self, batch):
        """A batch read from files: postprocessed again (postprocess_inputs) and judged by the
        off-policy estimators, whose estimates join the worker's metrics."""
        if self.offline_settings.postprocess_inputs:
            from tfrl.policy.sample_batch import MultiAgentBatch, concat_samples

            def postprocess(policy, policy_batch):
                pieces = (policy_batch.split_by_episode()
                          if "eps_id" in policy_batch else [policy_batch])
                return concat_samples([policy.postprocess_trajectory(piece.copy(), None, None)
                                       for piece in pieces if piece.count])

            if hasattr(batch, "policy_batches"):
                batch = MultiAgentBatch(
                    {pid: postprocess(self.policy_map[pid], b) if pid in self.policy_map else b
                     for pid, b in batch.policy_batches.items()}, batch.env_steps())
            else:
                batch = postprocess(self.policy_map[next(iter(self.policy_map))], batch)
        if self.estimators and not hasattr(batch, "policy_batches"):
            for estimator in self.estimators:
                estimator.process(batch)
        return batch

    # --- sampling -----------------------------------------------------------------------
    def sample(self):
        """Runs one fragment (or reads the next recorded batch, see `input`) and returns its
        postprocessed batch, or a SampleSummary when writing into replay. With `output` the
        batch is also recorded to files.

        Raises:
          CorruptRecordError, UnsupportedRecordError: a recorded input file that is damaged or
            packed with pickle.
          EnvCrashError, InvalidObservationError, ActionOutOfSpaceError: the env failed, gave a
            non-finite observation, or the policy chose an action outside the action space.
          replay.errors.ReplayError: writing into replay failed.
        """
        batch = self.input_reader.next()
        if self.input_reader.last_was_recorded:
            batch = self._prepare_recorded(batch)
        batch = self._postprocess_fragment(batch)
        steps = batch.env_steps() if hasattr(batch, "env_steps") else batch.count
        self.num_steps_sampled += steps
        self.callbacks.on_sample_end(worker=self, samples=batch)
        if self.output_writer is not None:
            self.output_writer.write(batch)
        if self.replay_output is None:
            return batch
        items = self.replay_output.write(batch)
        return SampleSummary(
            env_steps=steps,
            agent_steps=batch.agent_steps() if hasattr(batch, "agent_steps") else batch.count,
            items_written=items, episodes=self.get_metrics())

    def _postprocess_fragment(self, batch):
        """Each policy's `postprocess_fragment` on its rows of the batch."""
        if hasattr(batch, "policy_batches"):
            for pid, policy_batch in list(batch.policy_batches.items()):
                if pid in self.policy_map and policy_batch.count:
                    batch.policy_batches[pid] = self.policy_map[pid].postprocess_fragment(policy_batch)
            return batch
        policy = self.get_policy()
        return batch if policy is None or not batch.count else policy.postprocess_fragment(batch)

    def get_metrics(self) -> List[RolloutMetrics]:
        """The metrics of the episodes finished since the last call, with the off-policy
        estimates of the recorded episodes read since then (one evaluation pass)."""
        out = self._metrics_stash + self.runner.pop_metrics()
        self._metrics_stash = []
        for estimator in self.estimators:
            out.extend(estimator.get_metrics())
        return out

    # --- learning -----------------------------------------------------------------------
    def _policy_batches(self, samples) -> Dict[str, Any]:
        if hasattr(samples, "policy_batches"):
            return {pid: b for pid, b in samples.policy_batches.items()
                    if pid in self.policies_to_train}
        return {DEFAULT_POLICY_ID if DEFAULT_POLICY_ID in self.policy_map
                else next(iter(self.policy_map)): samples}

    def gradient_delay(self) -> None:
        """Sleeps `debug_gradient_delay_s[worker_index - 1]` seconds, if set: an artificially
        slow worker. Every strategy's gradient computation calls it."""
        delay = self.settings.gradient_delay(self.worker_index)
        if delay:
            time.sleep(delay)

    def compute_gradients(self, samples):
        """Gradients of the policies to train on `samples`.

        Returns (grads, info) for a SampleBatch and ({pid: grads}, {pid: info}) for a
        MultiAgentBatch.
        """
        self.gradient_delay()
        if not hasattr(samples, "policy_batches"):
            pid = next(iter(self._policy_batches(samples)))
            return self.policy_map[pid].compute_gradients(samples)
        grads, infos = {}, {}
        for pid, batch in self._policy_batches(samples).items():
            grads[pid], infos[pid] = self.policy_map[pid].compute_gradients(batch)
        return grads, infos

    def sample_and_compute_gradients(self):
        """One fragment sampled and turned into gradients on this worker (A3C's unit of work).

        Returns (grads, info, env steps sampled, the episodes finished since the last
        `get_metrics`): the driver never has to ask a busy worker for its episodes.
        """
        samples = self.sample()
        grads, info = self.compute_gradients(samples)
        return grads, info, samples.count, self.get_metrics()

    def apply_gradients(self, grads) -> Any:
        """Applies gradients from `compute_gradients` (a dict per policy, or one policy's list)."""
        if isinstance(grads, dict):
            return {pid: self.policy_map[pid].apply_gradients(g) for pid, g in grads.items()}
        pid = DEFAULT_POLICY_ID if DEFAULT_POLICY_ID in self.policy_map else next(
            iter(self.policy_map))
        return self.policy_map[pid].apply_gradients(grads)

    def learn_on_batch(self, samples) -> Dict[str, dict]:
        """One learn step of each policy to train on its part of `samples`; {pid: stats}."""
        return {pid: self.policy_map[pid].learn_on_batch(batch)
                for pid, batch in self._policy_batches(samples).items()}

    # --- weights, filters, state ------------------------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID):
        return self.policy_map.get(policy_id)

    def get_weights(self, policies: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """{policy_id: weights} (numpy) of `policies` (default: all)."""
        return {pid: p.get_weights() for pid, p in self.policy_map.items()
                if policies is None or pid in policies}

    def get_movable_weights(self, policies: Optional[Sequence[str]] = None) -> Dict[str, Any]:
        """{policy_id: weights} of `policies` (default: all) that have weights to move: unlike
        `get_weights`, a hand-coded policy leaving `get_weights` unimplemented (`has_weights`)
        is left out instead of asked. What weight syncs send."""
        from tfrl.policy.policy import has_weights

        return {pid: p.get_weights() for pid, p in self.policy_map.items()
                if (policies is None or pid in policies) and has_weights(p)}

    def set_weights(self, weights: Dict[str, Any], global_vars: Optional[dict] = None) -> None:
        """Sets the weights of the policies in `weights`; then `set_global_vars(global_vars)`.

        Raises:
          InvalidConfigError: a policy id in `weights` that this worker does not have.
        """
        for pid, w in weights.items():
            if pid not in self.policy_map:
                raise errors.InvalidConfigError(
                    f"set_weights got weights of policy {pid!r}, but this worker has "
                    f"{list(self.policy_map)}")
            self.policy_map[pid].set_weights(w)
        if global_vars:
            self.set_global_vars(global_vars)

    def set_global_vars(self, global_vars: dict) -> None:
        self.global_vars.update(global_vars)
        for policy in self.policy_map.values():
            policy.on_global_var_update(global_vars)

    def get_filters(self, flush_after: bool = False) -> Dict[str, Any]:
        """Copies of the observation filters; with `flush_after` their update buffers are cleared."""
        out = {pid: f.as_serializable() for pid, f in self.filters.items()}
        if flush_after:
            for f in self.filters.values():
                f.clear_buffer()
        return out

    def sync_filters(self, new_filters: Dict[str, Any]) -> None:
        """Takes the statistics of `new_filters`, keeping updates not yet flushed."""
        for pid, f in new_filters.items():
            self.filters[pid].sync(f)

    def filter_observation(self, observation: Any, policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """One observation through the worker's filter, without updating it."""
        batch = self.filters[policy_id](np.asarray(observation)[None], update=False)
        return batch[0]

    def set_filters(self, filters: Dict[str, Any]) -> None:
        """Makes this worker's filters exact copies of `filters` (updates not yet flushed are
        dropped); evaluation workers take the training filters this way."""
        for pid, f in filters.items():
            self.filters[pid].clear_buffer()
            self.filters[pid].sync(f)

    def save(self) -> dict:
        """Filters and policy states (weights, optimizer slots, counters) as plain data: nested
        dicts and lists of numbers and numpy arrays, which a trainer checkpoint stores as JSON
        plus npz (no pickle)."""
        return {
            "filters": {pid: f.get_state() for pid, f in self.filters.items()},
            "state": {pid: p.get_state() for pid, p in self.policy_map.items()},
            "num_steps_sampled": int(self.num_steps_sampled),
        }

    def restore(self, data: dict) -> None:
        """Restores what `save()` returned.

        Raises:
          PickleCheckpointError: pickled bytes (the format of older versions, refused
            unopened because unpickling can run code).
          CheckpointError: state that does not fit this worker's policies.
        """
        if isinstance(data, (bytes, bytearray)):
            raise errors.PickleCheckpointError(
                "this worker state is pickled bytes, the format of older tfrl versions; pickles "
                "can run code when loaded, so they are refused: pass the dict RolloutWorker.save() "
                "returns (a checkpoint written by this tfrl version)")
        try:
            policy_states, filter_states = data["state"], data["filters"]
        except (KeyError, TypeError) as exc:
            raise errors.CheckpointError(
                f"worker state lacks {exc}; pass what RolloutWorker.save() returned") from exc
        unknown = sorted(set(policy_states) - set(self.policy_map))
        if unknown:
            raise errors.CheckpointError(
                f"the worker state holds policies {unknown} that this worker does not have "
                f"({sorted(self.policy_map)}); restore it into a trainer with the same policies")
        filters = {pid: f if isinstance(f, Filter) else filter_from_state(f)
                   for pid, f in filter_states.items()}
        for pid, state in policy_states.items():
            self.policy_map[pid].set_state(state)
        for pid, f in filters.items():
            self.filters[pid] = self._with_preprocessing(pid, unwrapped_filter(f).copy())
            self.filters[pid].clear_buffer()
        self.runner.set_filters(self.filters)
        self.num_steps_sampled = int(data.get("num_steps_sampled", self.num_steps_sampled))

    def _with_preprocessing(self, policy_id: str, observation_filter: Filter) -> Filter:
        """`observation_filter`, behind classic preprocessing for a hand-written policy built
        with classic RLlib's preprocessed space (classic_preprocessing.py)."""
        policy = self.policy_map[policy_id]
        if not preprocesses_for(policy):
            return observation_filter
        return ClassicPreprocessingFilter(policy.observation_space.original_space,
                                          observation_filter)

    # --- helpers for WorkerSet ----------------------------------------------------------
    def for_policy(self, func: Callable[[Any], Any], policy_id: str = DEFAULT_POLICY_ID) -> Any:
        """func(policy) on one policy (classic RLlib's RolloutWorker.for_policy).

        Raises:
          KeyError: no policy of that id.
        """
        return func(self.policy_map[policy_id])

    def foreach_policy(self, func: Callable[[Any, str], Any]) -> List[Any]:
        return [func(policy, pid) for pid, policy in self.policy_map.items()]

    def foreach_trainable_policy(self, func: Callable[[Any, str], Any]) -> List[Any]:
        return [func(self.policy_map[pid], pid) for pid in self.policies_to_train]

    def foreach_env(self, func: Callable[[Any], Any]) -> List[Any]:
        """[func(env) for each env]; a VectorEnv's or BaseEnv's sub-envs where its
        `get_unwrapped()` gives them (classic RLlib's rule), else itself."""
        envs = self.envs
        if isinstance(self.env, (VectorEnv, BaseEnv)):
            envs = self.env.get_unwrapped() or self.envs
        return [func(env) for env in envs]

    def apply(self, func: Callable[..., Any], *args) -> Any:
        """func(self, *args): how WorkerSet runs a function inside a remote worker."""
        return func(self, *args)

    def set_policy(self, policy_id: str, policy: Any) -> None:
        """Replaces the policy `policy_id` by another instance (e.g. the learner's copy built
        under a distribution strategy) with the same spaces, copying the current weights into it;
        the env runner is rebuilt around it before the next sample."""
        old = self.policy_map[policy_id]
        policy.set_weights(old.get_weights())
        self.policy_map[policy_id] = policy
        self.runner = self._make_runner()
        for estimator in self.estimators:
            if estimator.policy is old:
                estimator.policy = policy

    def set_replay_output(self, replay_output: Any) -> None:
        """Starts (a ReplayOutputSpec) or stops (None) writing sampled fragments into replay.
        The old output is closed; an error closing it (its server is gone: the reason for a
        new output, often) is logged, not raised."""
        if self.replay_output is not None:
            old, self.replay_output = self.replay_output, None
            try:
                old.close()
            except replay_errors.ReplayError as exc:
                logger.warning("worker %d: closing its previous replay output failed: %s",
                               self.worker_index, exc)
        if replay_output is not None:
            self.replay_output = replay_output.make(
                self.policy_map, self.policies_to_train,
                self.settings.rollout_fragment_length, self.settings.observation_filter)

    def ping(self) -> bool:
        return True

    def stop(self) -> None:
        """Closes the output files, the replay writer and the envs."""
        if getattr(self, "output_writer", None) is not None:
            self.output_writer.close()
            self.output_writer = None
        if self.replay_output is not None:
            self.replay_output.close()
            self.replay_output = None
        for env in self.envs:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - closing must go on for the others
                logger.exception("closing env %r failed", self.env_name)

    def __repr__(self):
        return (f"RolloutWorker(env={getattr(self, 'env_name', None)!r}, "
                f"worker_index={getattr(self, 'worker_index', None)}, "
                f"policies={list(getattr(self, 'policy_map', {}))})")
