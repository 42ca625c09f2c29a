"""`build_trainer`: declares an algorithm's trainer from a policy, a config and an optimizer choice.

This is RLlib's classic trainer template. Hooks, in the order they run:

- `validate_config(config)`: raise `InvalidConfigError` for bad settings; may fill derived keys.
- `get_policy_class(config) -> policy class`: pick a policy other than `default_policy` (e.g. by
  config); None keeps the default.
- `before_init(trainer)`: runs before the workers exist.
- `make_workers(trainer, env_creator, policy_class, config) -> WorkerSet`: rarely overridden.
- `make_policy_optimizer(workers, config, replay) -> PolicyOptimizer`: the distributed strategy
  (default `sync_samples_optimizer`).
  `replay` is the trainer's `ReplayService`; the optimizer declares the tables it needs on it.
  The classic two-argument form `make_policy_optimizer(workers, config)` is called as such (its
  optimizer then gets no replay service; tfrl's optimizers that need one start their own).
- `after_init(trainer)`: runs once everything is built.
- `after_optimizer_step(trainer, fetches)`: after every `optimizer.step()` (e.g. PPO's KL update,
  DQN's target network update); `fetches` are the learner stats of that step.
- `after_train_result(trainer, result)`: may edit the result dict before it is returned.
- `execution_plan(workers, config) -> iterator of result dicts`: classic RLlib's dataflow API
  (tfrl/execution/). When given, no policy optimizer is built: each `train()` returns the
  plan's next result, and `trainer.optimizer` is the `ExecutionPlan`, which checkpoints the
  plan's counters (`make_policy_optimizer` and `after_optimizer_step` do not apply then).
- `mixins`: classes put in front of the trainer class in its MRO.

Every class built here is also a Ray Tune trainable (`tune.run(MyTrainer, config=...)`): its last
base is `tfrl.tune.trial_base()`.
"""
from __future__ import annotations

import inspect
import sys
import time
from typing import Callable, List, Optional

from tfrl.config import COMMON_CONFIG
from tfrl.trainer import DEFAULT_POLICY_ID, Trainer


def build_trainer(name: str, *, default_policy=None, default_config: Optional[dict] = None,
                  validate_config: Optional[Callable] = None, get_policy_class: Optional[Callable] = None,
                  make_policy_optimizer: Optional[Callable] = None, before_init: Optional[Callable] = None,
                  after_init: Optional[Callable] = None, after_optimizer_step: Optional[Callable] = None,
                  after_train_result: Optional[Callable] = None, mixins: Optional[List[type]] = None,
                  execution_plan: Optional[Callable] = None):
    """Returns a `Trainer` subclass named `name` wired with the given hooks (see module doc).

    Raises:
      InvalidConfigError: both execution_plan and make_policy_optimizer given.
    """
    original_kwargs = dict(locals())

    from tfrl.tune import trial_base

    if execution_plan is not None and make_policy_optimizer is not None:
        from tfrl import errors

        raise errors.InvalidConfigError(
            f"build_trainer({name!r}): give execution_plan or make_policy_optimizer, not both")
    make_optimizer = make_policy_optimizer or sync_samples_optimizer
    takes_replay = _positional_arity(make_optimizer) != 2

    class TrainerCls(*(mixins or []), Trainer, trial_base()):
        trainer_name = name
        _default_config = default_config or COMMON_CONFIG
        _policy = default_policy

        def _init(self, config: dict) -> None:
            from tfrl.rollout.worker_set import WorkerSet
            from tfrl.replay_hosting import ReplayService
            from tfrl.runtime import ensure_ray

            if validate_config:
                validate_config(config)
            if make_policy_optimizer is None and execution_plan is None:
                fit_sync_samples_config(config, name)
            policy_class = (get_policy_class(config) if get_policy_class else None) or default_policy
            self._policy = policy_class
            ensure_ray(config)
            check_learner_placement(config)
            if before_init:
                before_init(self)
            # multi-agent: the policies of config["multiagent"]; a spec without a class gets the
            # algorithm's policy
            policies = (config.get("multiagent") or {}).get("policies") or policy_class
            self.workers = WorkerSet(env_creator=config["env"], policy=policies, config=config,
                                     num_workers=config["num_workers"],
                                     default_policy_class=policy_class)
            self.replay = ReplayService(config)
            if execution_plan is not None:
                from tfrl.execution.plan import ExecutionPlan

                self.optimizer = ExecutionPlan(execution_plan, self.workers, config)
            else:
                self.optimizer = (make_optimizer(self.workers, config, self.replay)
                                  if takes_replay else make_optimizer(self.workers, config))
            if after_init:
                after_init(self)

        def _train(self) -> dict:
            if execution_plan is not None:
                return self._train_plan()
            start = time.time()
            steps_before = self.optimizer.num_steps_sampled
            while True:
                fetches = self.optimizer.step()
                if after_optimizer_step:
                    after_optimizer_step(self, fetches)
                enough_time = time.time() - start >= self.config["min_iter_time_s"]
                enough_steps = (self.optimizer.num_steps_sampled - steps_before
                                >= self.config["timesteps_per_iteration"])
                if enough_time and enough_steps:
                    break
            result = self.optimizer.collect_metrics(self.config["metrics_smoothing_episodes"])
            result.setdefault("timesteps_this_iter", self.optimizer.num_steps_sampled - steps_before)
            if after_train_result:
                after_train_result(self, result)
            return result

        def _train_plan(self) -> dict:
            steps_before = self.optimizer.num_steps_sampled
            result = self.optimizer.next_result()
            result.setdefault("timesteps_this_iter", self.optimizer.num_steps_sampled - steps_before)
            if after_train_result:
                after_train_result(self, result)
            return result

    def with_updates(**overrides):
        """A new trainer class with some hooks replaced (e.g. another make_policy_optimizer)."""
        return build_trainer(**dict(original_kwargs, **overrides))

    TrainerCls.with_updates = staticmethod(with_updates)
    TrainerCls.__name__ = name
    TrainerCls.__qualname__ = name
    # Picklable by reference when the calling module binds the class under `name`; otherwise
    # (the shipped XTrainer names) plain pickle fails and cloudpickle/Ray pickle it by value.
    caller_globals = sys._getframe(1).f_globals  # noqa: SLF001 - the caller's module, as namedtuple finds it
    TrainerCls.__module__ = caller_globals.get("__name__", __name__)
    return TrainerCls


def check_learner_placement(config: dict) -> None:
    """The learner runs in the trainer's process: with `learner_resources` set, that process's
    Ray node must offer them (a Tune trial reserves them for it; see tfrl/tune.py).

    Raises:
      InvalidConfigError: learner_resources is not a dict of resource amounts, or the node this
        trainer runs on does not offer them; the message says which node does.
    """
    import ray

    from tfrl import errors
    from tfrl.runtime import check_resources

    wanted = config.get("learner_resources")
    if wanted is None:
        return
    wanted = check_resources("learner_resources", wanted)
    here = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    offered = next((n.get("Resources", {}) for n in nodes if n["NodeID"] == here), {})
    if all(offered.get(name, 0.0) >= amount for name, amount in wanted.items()):
        return
    fitting = [n["NodeManagerAddress"] for n in nodes
               if all(n.get("Resources", {}).get(k, 0.0) >= v for k, v in wanted.items())]
    raise errors.InvalidConfigError(
        f"learner_resources={wanted}: the learner runs in the trainer's process, whose Ray node "
        f"({here[:12]}) does not offer them; run the trainer on a node that does "
        f"({fitting or 'none in this cluster'}), e.g. as a Tune trial, or change learner_resources")


def fit_sync_samples_config(config: dict, name: str) -> None:
    """Before the workers of a trainer declared without `make_policy_optimizer` exist: fills
    the minibatch keys its optimizer reads (one pass over the whole train batch unless the
    config sets num_sgd_iter / sgd_minibatch_size) and shortens fragments too long for the train
    batch (`fit_fragments_to_train_batch`).

    Raises:
      InvalidConfigError: a train batch that is not a multiple of one sampling round.
    """
    from tfrl.optimizers.train_batch import fit_fragments_to_train_batch

    config.setdefault("num_sgd_iter", 1)
    config.setdefault("sgd_minibatch_size", None)
    fit_fragments_to_train_batch(config, name)


def sync_samples_optimizer(workers, config: dict, replay):
    """The policy optimizer of a trainer declared without `make_policy_optimizer` (classic
    RLlib's default): a `SyncSamplesOptimizer`, one learn step on each train batch of
    synchronous samples."""
    from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer

    return SyncSamplesOptimizer(workers, config, replay)


def _positional_arity(fn: Callable) -> Optional[int]:
    """How many positional arguments `fn` takes (None: any number, or unknown)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


__all__ = ["build_trainer", "DEFAULT_POLICY_ID"]
