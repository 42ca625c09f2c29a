"""The env creator registry: turns an env name, a gymnasium id or a callable into an env.

Rollout workers (tfrl/rollout) never construct environments themselves; they resolve an
`env_creator` through `resolve_env_creator`, so a name registered with `register_env` works the
same in the driver and inside every Ray actor (the registry travels inside the pickled creator,
not as global state of a remote process).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Union

from tfrl import errors
from tfrl.utils.ray_registry import shared_through_ray

# the category of envs in Ray Tune's registry (ray.tune.registry.ENV_CREATOR)
_TUNE_ENV_CATEGORY = "env_creator"

EnvCreator = Callable[[dict], Any]

_REGISTRY: Dict[str, EnvCreator] = {}


class EnvContext(dict):
    """The env_config dict handed to creators, plus which worker and env slot it is for."""

    def __init__(self, env_config: Optional[dict] = None, worker_index: int = 0,
                 vector_index: int = 0, num_workers: int = 0):
        super().__init__(env_config or {})
        self.worker_index = worker_index
        self.vector_index = vector_index
        self.num_workers = num_workers


def register_env(name: str, creator: EnvCreator) -> None:
    """Registers `creator(env_config) -> env` under `name` (overrides an earlier registration).

    Raises:
      InvalidConfigError: `name` is not a non-empty string or `creator` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise errors.InvalidConfigError(f"register_env: the name must be a non-empty string, got {name!r}")
    if not callable(creator):
        raise errors.InvalidConfigError(
            f"register_env({name!r}, ...): the creator must be callable as creator(env_config), "
            f"got {type(creator).__name__}")
    _REGISTRY[name] = creator


def registered_envs() -> list:
    """Names registered with `register_env`, sorted."""
    return sorted(_REGISTRY)


@dataclasses.dataclass(frozen=True)
class ResolvedEnvCreator:
    """A picklable env creator with a name used in error messages.

    An env with classic gym's API (`reset()` without `seed`, 4-value `step`) that a callable or
    registered creator returns is wrapped in an adapter with gymnasium's (tfrl.env.classic_api).
    """

    name: str
    creator: Optional[EnvCreator] = None  # None: a gymnasium id, made with gymnasium.make

    def __call__(self, env_config: Optional[dict] = None) -> Any:
        if env_config is None:
            env_config = EnvContext()
        if self.creator is not None:
            from tfrl.env.classic_api import adapt_classic_env

            # classic gym / classic RLlib envs get gymnasium's API here, once, at creation
            return adapt_classic_env(self.creator(env_config), self.name)
        import gymnasium

        try:
            return gymnasium.make(self.name, **dict(env_config))
        except gymnasium.error.Error as exc:
            raise errors.UnknownEnvError(
                f"env {self.name!r} could not be made: {exc}. Pass a gymnasium id such as "
                f"'CartPole-v1', a name registered with tfrl.env.register_env (registered: "
                f"{registered_envs() or 'none'}), or a callable env_creator(env_config)") from exc


def resolve_env_creator(env: Union[str, EnvCreator, ResolvedEnvCreator]) -> ResolvedEnvCreator:
    """Returns a creator for a registered name, a gymnasium id or a callable(env_config).

    Registered names win over gymnasium ids; a name registered with Ray Tune's `register_env`
    (classic RLlib's registry) is found too while Ray runs. `atari:<ALE id>` and ALE ids themselves
    (`ALE/Pong-v5`, `PongNoFrameskip-v4`) give the preprocessed Atari env of tfrl.env.atari.
    Unknown gymnasium ids are detected here, before any worker starts.

    Raises:
      UnknownEnvError: `env` is a string that is neither registered nor a gymnasium id; an
        `atari:` name without ale-py installed or naming no ALE game.
      InvalidConfigError: `env` is neither a string nor callable.
    """
    if isinstance(env, ResolvedEnvCreator):
        return env
    if isinstance(env, str):
        if env in _REGISTRY:
            return ResolvedEnvCreator(env, _REGISTRY[env])
        # an env registered with Ray Tune's register_env (classic RLlib's registry)
        tune_creator = shared_through_ray(_TUNE_ENV_CATEGORY, env)
        if tune_creator is not None:
            return ResolvedEnvCreator(env, tune_creator)
        from tfrl.env.atari import AtariEnvCreator, atari_env_id

        atari_id = atari_env_id(env)
        if atari_id is not None:
            creator = AtariEnvCreator(atari_id)
            creator.check()
            return ResolvedEnvCreator(env, creator)
        import gymnasium

        try:
            gymnasium.spec(env)
        except gymnasium.error.Error as exc:
            raise errors.UnknownEnvError(
                f"unknown env {env!r}: {exc}. Pass a gymnasium id such as 'CartPole-v1', a name "
                f"registered with tfrl.env.register_env (registered: {registered_envs() or 'none'}), "
                "or a callable env_creator(env_config)") from exc
        return ResolvedEnvCreator(env, None)
    if callable(env):
        return ResolvedEnvCreator(getattr(env, "__name__", type(env).__name__), env)
    raise errors.InvalidConfigError(
        f"env must be a gymnasium id, a registered name or a callable env_creator(env_config); "
        f"got {type(env).__name__}")
