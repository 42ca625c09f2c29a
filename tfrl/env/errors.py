"""Named errors of environments and rollouts (until they move into tfrl/errors.py).

Each subclasses `tfrl.errors.TfrlError`; the classes tfrl.errors already has are re-exported here
so env and rollout code imports every error it raises from one place.
"""
from tfrl.errors import InvalidConfigError, TfrlError, UnsupportedSpaceError  # noqa: F401


class EnvError(TfrlError):
    """Base class of problems caused by an environment."""


class UnknownEnvError(EnvError, InvalidConfigError):
    """An env name that is neither registered with `register_env` nor a gymnasium id."""


class InvalidEnvError(EnvError, TypeError):
    """An object used as an env lacks reset/step or gymnasium spaces."""


class InvalidObservationError(EnvError, ValueError):
    """An env returned an observation holding NaN or infinity."""


class ActionOutOfSpaceError(EnvError, ValueError):
    """A policy chose an action outside the env's action space."""


class EnvCrashError(EnvError, RuntimeError):
    """An env raised an exception in reset() or step(); the worker holding it must be recreated."""


class WorkerCrashedError(TfrlError, RuntimeError):
    """A remote rollout worker died and could not be recreated."""
