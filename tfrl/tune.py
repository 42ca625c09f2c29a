"""Trainers as Ray Tune trainables: hyperparameter search over any tfrl algorithm.

    from ray import tune
    from tfrl.tune import as_trainable
    tuner = tune.Tuner(as_trainable("PPO"), param_space={"env": "CartPole-v1",
                       "lr": tune.grid_search([1e-3, 3e-4])})

Each trial builds the trainer inside its Tune actor; Ray is already initialised there, so the
trainer's rollout workers become nested actors and its replay server is embedded in the trial:
the trainer is nested inside the search without changing either (the RLlib composition idea).
"""
from __future__ import annotations

import os
from typing import Union


def as_trainable(trainer: Union[str, type]):
    """A `ray.tune.Trainable` class running `trainer` (a Trainer class or algorithm name).

    The trial's config is the trainer config; its key "env" names the environment. Checkpoints
    are the trainer's own (`Trainer.save`/`restore`).
    """
    from ray import tune

    from tfrl.agents.registry import get_trainer_class

    trainer_cls = get_trainer_class(trainer) if isinstance(trainer, str) else trainer

    class TfrlTrainable(tune.Trainable):
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

    TfrlTrainable.__name__ = f"{trainer_cls._name}Trainable"
    return TfrlTrainable
