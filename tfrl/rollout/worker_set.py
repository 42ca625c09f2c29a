"""WorkerSet: one local rollout worker plus N remote ones as Ray actors, with fault tolerance.

The driver's policy optimizer talks to rollout workers only through a WorkerSet: it broadcasts
weights (`sync_weights` puts them into Ray's object store once for all workers), merges
observation filters (`sync_filters`), and runs functions or methods on every worker
(`foreach_worker`, `call_remote_workers`). A remote worker whose actor died (killed, crashed
process) or whose env crashed (EnvCrashError) is detected on the call that fails, replaced by a
new actor with the same worker index, the local worker's current weights and filters, and
counted in `num_worker_failures`; the call returns the results of the healthy workers.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence

from tfrl import errors
from tfrl.env.registry import resolve_env_creator
from tfrl.rollout.policy_specs import policy_specs_by_id, unpack_policy_spec
from tfrl.rollout.rollout_worker import RolloutWorker
from tfrl.rollout.settings import WorkerSettings

logger = logging.getLogger(__name__)

# seconds of waiting for new remote workers before a warning says they have no room to start
WORKER_START_WARNING_S = 60.0


def is_worker_failure(exc: BaseException) -> bool:
    """True when `exc` (from ray.get on a worker call) means the worker must be replaced: its
    actor died or is unreachable, or its env crashed."""
    import ray

    if isinstance(exc, (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)):
        return True
    if isinstance(exc, ray.exceptions.RayTaskError):
        return isinstance(exc.cause, errors.EnvCrashError) if hasattr(exc, "cause") else False
    return isinstance(exc, errors.EnvCrashError)


class WorkerSet:
    """A local RolloutWorker and `num_workers` remote ones.

    Args:
      env_creator: gymnasium id, registered name or callable(env_config) (see RolloutWorker).
      policy: policy class or multi-agent policy dict (see RolloutWorker's policy_spec).
      config: worker config (see WorkerSettings); also read here: num_cpus_per_worker,
        num_gpus_per_worker, custom_resources_per_worker (Ray places each remote worker on a
        node offering all three), recreate_failed_workers. Keys it lacks take COMMON_CONFIG's
        values. `trainer_config=` is the same argument under RLlib's name.
      num_workers: remote workers to start (0: only the local worker samples).
      replay_output: a ReplayOutputSpec given to the remote workers (and to the local worker
        when num_workers is 0), so they write into replay.
      default_policy_class: see RolloutWorker.

    Raises:
      UnknownEnvError, InvalidEnvError, UnsupportedSpaceError, InvalidConfigError: from building
        the local worker (the remote actors, started first, are killed); InvalidConfigError
        also when both config and trainer_config are given, or custom_resources_per_worker is
        not a dict of resource amounts or no node of the cluster offers it.
      WorkerCrashedError: a remote worker failed to start (raised by the first call that needs
        the remote workers; see `wait_until_started`).
    """

    def __init__(self, env_creator: Any, policy: Any, config: Optional[dict] = None,
                 num_workers: int = 0, *, replay_output: Any = None,
                 default_policy_class: Any = None, trainer_config: Optional[dict] = None):
        if trainer_config is not None:
            if config is not None:
                raise errors.InvalidConfigError(
                    "WorkerSet got both config and trainer_config (the same argument under "
                    "RLlib's name); pass one of them")
            config = trainer_config
        self.env_creator = resolve_env_creator(env_creator)
        self.policy_spec = policy
        self.config = dict(config or {})
        self.settings = WorkerSettings.from_config(self.config)
        self.replay_output = replay_output
        self.default_policy_class = default_policy_class
        self.num_worker_failures = 0
        self._remote: List[Any] = []
        self._remote_indices: List[int] = []
        self._actor_class = None
        # what remote workers build: the policy spec, or a NumpyPolicySpec (numpy_policy.py)
        self._remote_policy_spec = policy
        # Remote actors take seconds to start (a process that imports TensorFlow and builds its
        # policy). They start first and are waited for at the first call that needs them, so
        # this process builds the local worker, and its caller the learner, meanwhile. A policy
        # that may run in numpy on the remote workers is built here first to find out; such
        # workers start in about a second.
        self._starting: List[Any] = []  # refs of the new actors' initialisation calls
        indices = list(range(1, num_workers + 1))
        numpy_first = bool(indices) and self._may_act_in_numpy()
        actors = [] if numpy_first else [self._make_actor(i) for i in indices]
        try:
            self._local = RolloutWorker(
                self.env_creator, policy, self.config, worker_index=0, num_workers=num_workers,
                replay_output=replay_output if num_workers == 0 else None,
                default_policy_class=default_policy_class)
            if numpy_first:
                self._choose_numpy_policies()
                actors = [self._make_actor(i) for i in indices]
            self._starting = self._initialisation_calls(actors)
        except BaseException:
            _kill_actors(actors)
            raise
        self._remote.extend(actors)
        self._remote_indices.extend(indices)

    # --- membership ----------------------------------------------------------------------
    def local_worker(self) -> RolloutWorker:
        return self._local

    def remote_workers(self) -> List[Any]:
        """The remote actors, once started.

        Raises:
          WorkerCrashedError: a remote worker failed to start.
        """
        self.wait_until_started()
        return list(self._remote)

    def wait_until_started(self) -> None:
        """Waits for remote workers that are still starting (every call that uses them does).

        Raises:
          WorkerCrashedError: one failed to start (the set's actors are then killed).
        """
        if not self._starting:
            return
        starting, self._starting = self._starting, []
        try:
            self._await_initialisation(starting)
        except errors.WorkerCrashedError:
            _kill_actors(self._remote)
            self._remote, self._remote_indices = [], []
            raise

    def remote_worker_index(self, worker: Any) -> int:
        """The worker index (1..N) of a remote actor of this set (a recreated one keeps the
        index of the worker it replaced).

        Raises:
          ValueError: `worker` is not one of this set's remote actors.
        """
        self.wait_until_started()
        return self._remote_indices[self._remote.index(worker)]

    def num_remote_workers(self) -> int:
        return len(self._remote)

    def num_healthy_workers(self) -> int:
        """Remote workers that answered their last call or were recreated since."""
        return len(self._remote)

    def _policy_specs(self) -> Optional[Dict[str, Any]]:
        """policy_id -> (class, observation space, action space, config) of a multi-policy
        spec, each as the workers' policy maps unpack it; None for a single policy class."""
        if not isinstance(self.policy_spec, dict):
            return None
        specs = policy_specs_by_id(self.policy_spec, self.settings.multiagent or {})
        return {pid: unpack_policy_spec(pid, spec, self.default_policy_class)
                for pid, spec in specs.items()}

    def _may_act_in_numpy(self) -> bool:
        from tfrl.policy.numpy_policy import could_act_in_numpy

        if not (self.settings.numpy_actions and self.settings.numpy_rollout_workers):
            return False
        specs = self._policy_specs()
        if specs is None:
            return could_act_in_numpy(self.policy_spec or self.default_policy_class,
                                      self.config.get("model"))
        return all(could_act_in_numpy(policy_cls, dict(self.config, **(config or {})).get("model"))
                   for policy_cls, _, _, config in specs.values())

    def _choose_numpy_policies(self) -> None:
        """Remote workers get NumpyPolicySpecs where every policy of the local worker has one
        (one policy needing TensorFlow would start it in the worker anyway)."""
        from tfrl.policy.numpy_policy import numpy_policy_spec

        stand_ins = {pid: numpy_policy_spec(policy)
                     for pid, policy in self._local.policy_map.items()}
        if any(spec is None for spec in stand_ins.values()):
            return
        specs = self._policy_specs()
        if specs is None:
            [self._remote_policy_spec] = stand_ins.values()
            return
        # the same spaces and per-policy config as the local worker's spec, the stand-in as class
        self._remote_policy_spec = {pid: (stand_ins[pid], *spec[1:]) for pid, spec in specs.items()}

    @property
    def remote_policies_in_numpy(self) -> bool:
        """True when remote workers act with NumpyPolicy (see tfrl/policy/numpy_policy.py)."""
        return self._remote_policy_spec is not self.policy_spec

    def _make_actor(self, worker_index: int):
        if self._actor_class is None:
            from tfrl.runtime import check_feasible, check_resources

            resources = check_resources("custom_resources_per_worker",
                                        self.settings.custom_resources_per_worker or {})
            check_feasible("custom_resources_per_worker", resources)
            self._actor_class = RolloutWorker.as_remote(
                num_cpus=self.settings.num_cpus_per_worker,
                num_gpus=self.settings.num_gpus_per_worker, resources=resources or None)
        config = self.config
        if self.remote_policies_in_numpy and isinstance(self._remote_policy_spec, dict):
            # the classes in multiagent.policies would import their (TensorFlow) modules there
            config = dict(config, multiagent=dict(config.get("multiagent") or {},
                                                  policies=self._remote_policy_spec))
        return self._actor_class.remote(
            self.env_creator, self._remote_policy_spec, config, worker_index=worker_index,
            num_workers=max(self._remote_indices + [worker_index]),
            replay_output=self.replay_output,
            default_policy_class=None if self.remote_policies_in_numpy else self.default_policy_class)

    def _initialisation_calls(self, actors: Sequence[Any]) -> List[Any]:
        """Starts giving new actors the local worker's weights and filters; returns the refs."""
        import ray

        weights = ray.put(self._local.get_movable_weights())
        filters = ray.put(self._local.get_filters())
        global_vars = dict(self._local.global_vars)
        return ([a.set_weights.remote(weights, global_vars) for a in actors]
                + [a.sync_filters.remote(filters) for a in actors])

    def _initialise(self, actors: Sequence[Any]) -> None:
        """Waits for new actors and gives them the local worker's weights and filters."""
        self._await_initialisation(self._initialisation_calls(actors))

    def _await_initialisation(self, refs: List[Any]) -> None:
        """ray.get of initialisation calls; an actor that died starting is a WorkerCrashedError.
        Workers still not started after WORKER_START_WARNING_S (Ray has no room for them:
        another trainer's workers may hold the CPUs) are named in a warning, then waited for."""
        import ray

        try:
            _, pending = ray.wait(refs, num_returns=len(refs), timeout=WORKER_START_WARNING_S)
            if pending:
                logger.warning(
                    "rollout workers for env %r have not started after %.0f s; each asks Ray "
                    "for %g CPU(s) (num_cpus_per_worker) and %g GPU(s), and Ray has %g of %g "
                    "CPUs free (another trainer's workers may hold them). Still waiting: lower "
                    "num_workers (0 samples in this process) or give Ray more CPUs",
                    self.env_creator.name, WORKER_START_WARNING_S,
                    self.settings.num_cpus_per_worker, self.settings.num_gpus_per_worker,
                    ray.available_resources().get("CPU", 0), ray.cluster_resources().get("CPU", 0))
            ray.get(refs)
        except ray.exceptions.RayActorError as exc:
            raise errors.WorkerCrashedError(
                f"a rollout worker for env {self.env_creator.name!r} failed to start: {exc}") from exc

    def add_workers(self, num_workers: int) -> None:
        """Starts `num_workers` more remote workers with the current weights and filters.

        Raises:
          WorkerCrashedError: one of them failed to start.
        """
        self.wait_until_started()
        start = max(self._remote_indices, default=0) + 1
        indices = list(range(start, start + num_workers))
        actors = [self._make_actor(i) for i in indices]
        try:
            self._initialise(actors)
        except BaseException:
            _kill_actors(actors)
            raise
        self._remote.extend(actors)
        self._remote_indices.extend(indices)

    def recreate_worker(self, worker: Any, error: Optional[BaseException] = None) -> Any:
        """Replaces a failed remote worker by a new actor with the same worker index and the
        current weights and filters; counts the failure and returns the new actor (None when
        config['recreate_failed_workers'] is False and the worker was only removed)."""
        import ray

        self.wait_until_started()
        position = self._remote.index(worker)
        index = self._remote_indices[position]
        self.num_worker_failures += 1
        logger.warning("rollout worker %d failed (%s); %s", index, error,
                       "recreating it" if self.settings.recreate_failed_workers
                       else "removing it")
        try:
            ray.kill(worker, no_restart=True)
        except Exception:  # noqa: BLE001 - the actor may already be gone
            pass
        recreate = self.settings.recreate_failed_workers
        if recreate and not self._placeable():
            logger.error("rollout worker %d cannot be recreated: no live node offers its resources "
                         "(num_cpus_per_worker, num_gpus_per_worker, custom_resources_per_worker); "
                         "going on without it", index)
            recreate = False
        if not recreate:
            del self._remote[position]
            del self._remote_indices[position]
            return None
        new = self._make_actor(index)
        self._initialise([new])
        self._remote[position] = new
        return new

    def _placeable(self) -> bool:
        """True when some live node of the cluster offers one remote worker's resources."""
        from tfrl.runtime import check_feasible

        wanted = dict(self.settings.custom_resources_per_worker or {})
        for name, amount in (("CPU", self.settings.num_cpus_per_worker),
                             ("GPU", self.settings.num_gpus_per_worker)):
            if amount:
                wanted[name] = float(amount)
        try:
            check_feasible("rollout worker resources", wanted)
        except errors.InvalidConfigError:
            return False
        return True

    def worker_node_ids(self) -> List[str]:
        """The Ray node id of every remote worker, in `remote_workers()` order."""
        import ray

        return ray.get([w.apply.remote(_node_id) for w in self.remote_workers()])

    # --- calls on all workers -----------------------------------------------------------
    def gather(self, refs: List[tuple], timeout: Optional[float] = None) -> List[Any]:
        """ray.get of (worker, ref) pairs started by the caller (for example a sampling round
        launched earlier to overlap with learning); failed workers are recreated and left out.

        Raises:
          whatever the call raised in a worker, except worker failures (those are recovered).
        """
        import ray

        self.wait_until_started()
        results = []
        for worker, ref in refs:
            try:
                results.append(ray.get(ref, timeout=timeout))
            except Exception as exc:  # noqa: BLE001 - sorted into worker failures and others
                if not is_worker_failure(exc):
                    raise
                if worker in self._remote:
                    self.recreate_worker(worker, exc)
        return results

    def call_remote_workers(self, method: str, *args, timeout: Optional[float] = None,
                            **kwargs) -> List[Any]:
        """Calls `method(*args, **kwargs)` on every remote worker; results of the healthy ones.

        Raises:
          whatever the method raised in a worker, except worker failures (those are recovered).
        """
        self.wait_until_started()
        refs = [(w, getattr(w, method).remote(*args, **kwargs)) for w in self._remote]
        return self.gather(refs, timeout)

    def foreach_worker(self, func: Callable[[Any], Any], local_worker: bool = True,
                       timeout: Optional[float] = None) -> List[Any]:
        """[func(worker)] for the local worker (first, if `local_worker`) and every healthy
        remote worker; failed remote workers are recreated and left out of the result."""
        self.wait_until_started()
        refs = [(w, w.apply.remote(func)) for w in self._remote]
        local = [func(self._local)] if local_worker else []
        return local + self.gather(refs, timeout)

    def foreach_worker_with_index(self, func: Callable[[Any, int], Any], local_worker: bool = True,
                                  timeout: Optional[float] = None) -> List[Any]:
        """Like foreach_worker with func(worker, worker_index)."""
        self.wait_until_started()
        refs = [(w, w.apply.remote(func, i)) for w, i in zip(self._remote, self._remote_indices)]
        local = [func(self._local, 0)] if local_worker else []
        return local + self.gather(refs, timeout)

    def foreach_policy(self, func: Callable[[Any, str], Any]) -> List[Any]:
        """func(policy, policy_id) for every policy of every worker, flattened."""
        return [r for rs in self.foreach_worker(lambda w: w.foreach_policy(func)) for r in rs]

    def foreach_env(self, func: Callable[[Any], Any]) -> List[List[Any]]:
        return self.foreach_worker(lambda w: w.foreach_env(func))

    # --- synchronisation ----------------------------------------------------------------
    def sync_weights(self, policies: Optional[Sequence[str]] = None,
                     global_vars: Optional[dict] = None, wait: bool = True) -> List[tuple]:
        """Sends the local worker's weights of `policies` (default: all; either way only
        policies that have weights, see `RolloutWorker.get_movable_weights`), one ray.put for
        all, and global vars to every remote worker, and waits until they are set.

        With `wait=False` the calls are only sent and their (worker, ref) pairs returned, for
        `gather` later: a call made to a worker afterwards (say `sample`) still runs after its
        `set_weights`, since a worker actor runs one caller's calls in the order they were made,
        and the round trip of waiting is saved. Returns [] when it waited.
        """
        import ray

        if global_vars:
            self._local.set_global_vars(global_vars)
        self.wait_until_started()
        if not self._remote:
            return []
        weights = ray.put(self._local.get_movable_weights(policies))
        pending = [(w, w.set_weights.remote(weights, global_vars)) for w in self._remote]
        if not wait:
            return pending
        self.gather(pending)
        return []

    def set_replay_output(self, replay_output: Any) -> None:
        """Points every worker (and workers started or recreated later) at a replay output;
        the local worker writes too when there are no remote workers."""
        self.wait_until_started()
        self.replay_output = replay_output
        if not self._remote:
            self._local.set_replay_output(replay_output)
        self.gather([(w, w.set_replay_output.remote(replay_output)) for w in self._remote])

    def sync_filters(self) -> None:
        """Merges every remote worker's new filter statistics into the local worker's filters and
        sends the merged filters back to all of them. Nothing travels when every filter is
        stateless (NoFilter)."""
        import ray

        self.wait_until_started()
        local = self._local.filters
        if all(f.stateless for f in local.values()):
            return
        for remote_filters in self.gather(
                [(w, w.get_filters.remote(flush_after=True)) for w in self._remote]):
            for pid, f in remote_filters.items():
                local[pid].apply_changes(f)
        ref = ray.put(self._local.get_filters())
        self.gather([(w, w.sync_filters.remote(ref)) for w in self._remote])

    def probe_workers(self, timeout: float = 30.0) -> int:
        """Pings every remote worker, recreates the dead ones; returns how many were recreated."""
        before = self.num_worker_failures
        self.call_remote_workers("ping", timeout=timeout)
        return self.num_worker_failures - before

    def stop(self) -> None:
        """Stops the local worker and kills the remote actors."""
        import ray

        try:
            self._local.stop()
        finally:
            for w in self._remote:
                try:
                    ray.get(w.stop.remote(), timeout=10)
                except Exception:  # noqa: BLE001 - it may be dead already
                    pass
                try:
                    ray.kill(w, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
            self._remote = []
            self._remote_indices = []


def _node_id(_worker) -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _kill_actors(actors: Sequence[Any]) -> None:
    """Kills actors that will not join the set (it failed to come up)."""
    import ray

    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - it may be dead already
            pass
