"""Trainers as Ray Tune trainables: hyperparameter search over any tfrl algorithm.

    from ray import tune
    from tfrl.tune import as_trainable
    tuner = tune.Tuner(as_trainable("PPO"), param_space={"env": "CartPole-v1", "num_workers": 2,
                       "lr": tune.grid_search([1e-3, 3e-4])})

Each trial builds the trainer inside its Tune actor; Ray is already initialised there, so the
trainer's rollout workers become nested actors and its replay server is embedded in the trial:
the trainer is nested inside the search without changing either (the RLlib composition idea).
A trial reserves what its trainer uses as one placement group (`trainer_resources`): a bundle
for the trainer (num_cpus_for_driver, default 0 as outside Tune, + num_gpus) and one per
rollout worker (num_cpus_per_worker, num_gpus_per_worker). Tune captures the actors a trial
creates into its placement group, so the workers start inside the trial's reservation instead
of waiting for CPUs that other trials hold.
Importing this module registers the algorithm names with Tune, so `tune.Tuner("PPO", ...)`
works as well. Every trainer class is a Tune trainable itself (`trial_base`), so
`tune.run(PPOTrainer, config=...)` runs it as classic RLlib code expects.
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Union


def trainer_resources(trainer_cls: Union[str, type], config: dict):
    """The `PlacementGroupFactory` (a `TrialResources`, whose `to_json()` gives classic scripts'
    `resources_per_trial` dict) a trial running `trainer_cls` (a class or algorithm name)
    with `config` needs: the trainer's bundle ({"CPU": num_cpus_for_driver, "GPU": num_gpus}
    plus learner_resources) then one bundle per rollout worker ({"CPU": num_cpus_per_worker,
    "GPU": num_gpus_per_worker} plus custom_resources_per_worker) and, with
    `evaluation_interval`, one per evaluation worker (`evaluation_config`'s resources), from the
    algorithm's defaults updated with `config`. A worker that
    asks for no resources gets no bundle; a trainer that asks for none gets an empty bundle
    (it then reserves, as outside Tune, only its rollout workers), unless nothing at all would
    be reserved: then the trainer's bundle is 1 CPU.

    Raises:
      InvalidConfigError: unknown algorithm name.
    """
    from tfrl.tune_resources import TrialResources

    if isinstance(trainer_cls, str):
        from tfrl.registry import get_trainer_class

        trainer_cls = get_trainer_class(trainer_cls)
    merged = dict(trainer_cls.default_config(), **(config or {}))

    def bundle(cpus, gpus):
        return {key: float(amount) for key, amount in (("CPU", cpus), ("GPU", gpus)) if amount}

    driver = dict(bundle(merged["num_cpus_for_driver"], merged["num_gpus"]),
                  **{k: float(v) for k, v in (merged.get("learner_resources") or {}).items() if v})
    def worker_bundles(settings: dict, count: int) -> list:
        worker = dict(bundle(settings["num_cpus_per_worker"], settings["num_gpus_per_worker"]),
                      **{k: float(v) for k, v in
                         (settings.get("custom_resources_per_worker") or {}).items() if v})
        return [worker] * count if worker else []

    workers = worker_bundles(merged, int(merged["num_workers"]))
    if merged.get("evaluation_interval"):
        # the evaluation workers start inside the trial too (classic RLlib counted them)
        evaluation = dict(merged, **(merged.get("evaluation_config") or {}))
        workers += worker_bundles(evaluation, int(merged.get("evaluation_num_workers") or 0))
    if not driver and not workers:
        driver = {"CPU": 1.0}  # Tune needs a request; the trainer then does all the work itself
    return TrialResources([driver] + workers, strategy="PACK")


def _trial_result(result: dict) -> dict:
    result = dict(result)
    result.pop("config", None)  # Tune keeps the trial's config itself
    return result


def _load_trainer_checkpoint(trainer, checkpoint) -> None:
    from tfrl.checkpoint import LEGACY_STATE_FILE, STATE_FILE

    path = checkpoint if isinstance(checkpoint, str) else checkpoint.path
    # a legacy pickle is handed to restore() too, which refuses it with a named error
    candidates = [os.path.join(root, name) for root, _, names in os.walk(path)
                  for name in names if name in (STATE_FILE, LEGACY_STATE_FILE)]
    trainer.restore(max(candidates, key=lambda c: (os.path.dirname(c), c.endswith(STATE_FILE))))


def as_trainable(trainer: Union[str, type]):
    """A `ray.tune.Trainable` class running `trainer` (a Trainer class or algorithm name).

    The trial's config is the trainer config; its key "env" names the environment. Checkpoints
    are the trainer's own (`Trainer.save`/`restore`). Each trial requests the resources of
    `trainer_resources`; `tune.with_resources` overrides them. An algorithm name is resolved
    when the trial starts, so registering names imports no algorithm.

    Raises:
      InvalidConfigError: unknown algorithm name (when the trial starts or asks for resources).
    """
    from ray import tune

    def resolve():
        if isinstance(trainer, str):
            from tfrl.registry import get_trainer_class

            return get_trainer_class(trainer)
        return trainer

    class TfrlTrainable(tune.Trainable):
        @classmethod
        def default_resource_request(cls, config):
            return trainer_resources(resolve(), config)

        def setup(self, config):
            self.trainer = resolve()(config=dict(config))

        def step(self):
            return _trial_result(self.trainer.train())

        def save_checkpoint(self, checkpoint_dir: str):
            self.trainer.save(checkpoint_dir)
            return None

        def load_checkpoint(self, checkpoint):
            _load_trainer_checkpoint(self.trainer, checkpoint)

        def cleanup(self):
            self.trainer.stop()

    name = trainer if isinstance(trainer, str) else trainer.trainer_name
    TfrlTrainable.__name__ = f"{name}Trainable"
    return TfrlTrainable


def runs_in_trial(method: Callable) -> Callable:
    """A Trainer method that, called on a trial shell (an instance Tune built, whose
    `_tune_trial` is set), runs Tune's own method of that name instead (`trial_base`), which
    drives the plain trainer inside the shell."""
    name = method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if self._tune_trial:
            return getattr(trial_base(), name)(self, *args, **kwargs)
        return method(self, *args, **kwargs)

    return call


def trial_base() -> type:
    """The `ray.tune.Trainable` base every trainer class has last among its bases, so that a
    trainer class is itself a Tune trainable (`tune.run(PPOTrainer, config=...)`, as in classic
    RLlib). Tune builds the class with `logger_creator`/`storage`; that instance is a trial
    shell (`Trainer._tune_trial`) that runs a plain instance of the same class inside it, with
    the resources of `trainer_resources`."""
    global _TRIAL_BASE
    if _TRIAL_BASE is None:
        from ray import tune

        class TrainerTrial(tune.Trainable):
            @classmethod
            def default_resource_request(cls, config):
                return trainer_resources(getattr(cls, "__ray_actor_class__", cls), config)

            def setup(self, config):
                plain_cls = getattr(type(self), "__ray_actor_class__", type(self))
                self._trial_trainer = plain_cls(config=dict(config))

            def step(self):
                return _trial_result(self._trial_trainer.train())

            def save_checkpoint(self, checkpoint_dir: str):
                self._trial_trainer.save(checkpoint_dir)
                return None

            def load_checkpoint(self, checkpoint):
                _load_trainer_checkpoint(self._trial_trainer, checkpoint)

            def cleanup(self):
                self._trial_trainer.stop()

        _TRIAL_BASE = TrainerTrial
    return _TRIAL_BASE


_TRIAL_BASE = None


def register_trainables() -> None:
    """Registers every tfrl algorithm name ("PPO", "DQN", ...) as a Tune trainable, so
    `tune.Tuner("PPO", ...)` and `tune.run("PPO", ...)` run tfrl's trainer."""
    from ray.tune import register_trainable

    from tfrl.registry import ALGORITHMS

    for name in ALGORITHMS:
        register_trainable(name, as_trainable(name))


register_trainables()
