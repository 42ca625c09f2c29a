"""Trainers as Ray Tune trainables: hyperparameter search over any tfrl algorithm.

    from ray import tune
    from tfrl.tune import as_trainable
    tuner = tune.Tuner(as_trainable("PPO"), param_space={"env": "CartPole-v1", "num_workers": 2,
                       "lr": tune.grid_search([1e-3, 3e-4])})

Each trial builds the trainer inside its Tune actor; Ray is already initialised there, so the
trainer's rollout workers become nested actors and its replay server is embedded in the trial:
the trainer is nested inside the search without changing either (the RLlib composition idea).
A trial reserves what its trainer uses as one placement group (`trainer_resources`): a bundle
for the trainer (1 CPU + num_gpus) and one per rollout worker (num_cpus_per_worker,
num_gpus_per_worker). Tune captures the actors a trial creates into its placement group, so the
workers start inside the trial's reservation instead of waiting for CPUs that other trials hold.
Importing this module registers the algorithm names with Tune, so `tune.Tuner("PPO", ...)`
works as well.
"""
from __future__ import annotations

import os
from typing import Union


def trainer_resources(trainer_cls: type, config: dict):
    """The `PlacementGroupFactory` a trial running `trainer_cls` with `config` needs: the
    trainer's bundle ({"CPU": 1, "GPU": num_gpus}) then one bundle per rollout worker
    ({"CPU": num_cpus_per_worker, "GPU": num_gpus_per_worker}), from the algorithm's defaults
    updated with `config`. A worker that asks for no resources gets no bundle."""
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    merged = dict(trainer_cls.default_config(), **(config or {}))

    def bundle(cpus, gpus):
        return {key: float(amount) for key, amount in (("CPU", cpus), ("GPU", gpus)) if amount}

    driver = bundle(1, merged["num_gpus"])
    worker = bundle(merged["num_cpus_per_worker"], merged["num_gpus_per_worker"])
    num_workers = int(merged["num_workers"])
    return PlacementGroupFactory([driver] + ([worker] * num_workers if worker else []),
                                 strategy="PACK")


def as_trainable(trainer: Union[str, type]):
    """A `ray.tune.Trainable` class running `trainer` (a Trainer class or algorithm name).

    The trial's config is the trainer config; its key "env" names the environment. Checkpoints
    are the trainer's own (`Trainer.save`/`restore`). Each trial requests the resources of
    `trainer_resources`; `tune.with_resources` overrides them.

    Raises:
      InvalidConfigError: unknown algorithm name.
    """
    from ray import tune

    from tfrl.agents.registry import get_trainer_class

    trainer_cls = get_trainer_class(trainer) if isinstance(trainer, str) else trainer

    class TfrlTrainable(tune.Trainable):
        @classmethod
        def default_resource_request(cls, config):
            return trainer_resources(trainer_cls, config)

        def setup(self, config):
            self.trainer = trainer_cls(config=dict(config))

        def step(self):
            result = self.trainer.train()
            result.pop("config", None)
            return result

        def save_checkpoint(self, checkpoint_dir: str):
            self.trainer.save(checkpoint_dir)
            return None

        def load_checkpoint(self, checkpoint):
            from tfrl.trainer import LEGACY_STATE_FILE, STATE_FILE

            path = checkpoint if isinstance(checkpoint, str) else checkpoint.path
            # a legacy pickle is handed to restore() too, which refuses it with a named error
            candidates = [os.path.join(root, name) for root, _, names in os.walk(path)
                          for name in names if name in (STATE_FILE, LEGACY_STATE_FILE)]
            self.trainer.restore(max(candidates, key=lambda c: (os.path.dirname(c),
                                                               c.endswith(STATE_FILE))))

        def cleanup(self):
            self.trainer.stop()

    TfrlTrainable.__name__ = f"{trainer_cls.trainer_name}Trainable"
    return TfrlTrainable


def register_trainables() -> None:
    """Registers every tfrl algorithm name ("PPO", "DQN", ...) as a Tune trainable, so
    `tune.Tuner("PPO", ...)` and `tune.run("PPO", ...)` run tfrl's trainer."""
    from ray.tune import register_trainable

    from tfrl.agents.registry import ALGORITHMS

    for name in ALGORITHMS:
        register_trainable(name, as_trainable(name))


register_trainables()
