"""Atari through the Arcade Learning Environment (`ale-py`, which ships its ROMs): the standard
DeepMind preprocessing behind one env creator.

Sits under tfrl/env next to the registry: `resolve_env_creator` turns an env name
`"atari:<id>"` (e.g. `"atari:PongNoFrameskip-v4"`) or any ALE id (`"ALE/Pong-v5"`,
`"PongNoFrameskip-v4"`) into an `AtariEnvCreator`, so rollout workers build the preprocessed env
from `env: ...` in a config. The pipeline is gymnasium's own wrappers:

    gymnasium.make(id, frameskip=1)          the ALE env, frame skipping left to the wrapper
    AtariPreprocessing                        noop reset, frame skip with max-pooling, 84x84
                                              grayscale, optional terminal on life loss
    FrameStackObservation(frame_stack)        the last `frame_stack` frames, (k, 84, 84)
    channels_last                             (84, 84, k) uint8, what VisionNetwork's convolutions
                                              read

Keys of `env_config` read here (the rest go to `gymnasium.make`, e.g.
`repeat_action_probability`): frame_stack (4), screen_size (84), frame_skip (4), noop_max (30),
terminal_on_life_loss (False).
Install with `pip install "tfrl[atari]"` (ale-py and opencv, which AtariPreprocessing resizes with).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from tfrl import errors

ATARI_PREFIX = "atari:"
PREPROCESSING_DEFAULTS = {"frame_stack": 4, "screen_size": 84, "frame_skip": 4, "noop_max": 30,
                          "terminal_on_life_loss": False}
_INSTALL_HINT = 'install the Atari extra: pip install "tfrl[atari]" (ale-py and opencv)'


def import_ale() -> Any:
    """Imports ale_py and registers its envs with gymnasium (ALE/..., ...NoFrameskip-v4).

    Raises:
      UnknownEnvError: ale-py (or opencv, which the preprocessing needs) is not installed.
    """
    try:
        import ale_py
        import cv2  # noqa: F401 - AtariPreprocessing resizes frames with it
    except ImportError as exc:
        raise errors.UnknownEnvError(
            f"Atari envs need ale-py and opencv ({exc}); {_INSTALL_HINT}") from exc
    import gymnasium

    gymnasium.register_envs(ale_py)
    return ale_py


def is_ale_id(env_id: str) -> bool:
    """True when `env_id` is a gymnasium id that ale-py provides (imports ale-py for ids that
    gymnasium does not know yet, if it is installed)."""
    import gymnasium

    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error:
        try:
            import_ale()
            spec = gymnasium.spec(env_id)
        except (errors.UnknownEnvError, gymnasium.error.Error):
            return False
    return str(spec.entry_point).startswith("ale_py")


def channels_last(env) -> Any:
    """`env` with its stacked frames' axis moved last: (k, H, W) -> (H, W, k)."""
    import gymnasium

    space = env.observation_space
    stack, height, width = space.shape
    new_space = gymnasium.spaces.Box(np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1),
                                     (height, width, stack), space.dtype)
    return gymnasium.wrappers.TransformObservation(
        env, lambda obs: np.ascontiguousarray(np.moveaxis(obs, 0, -1)), new_space)


def check_ale_id(env_id: str) -> None:
    """Raises UnknownEnvError unless `env_id` is an ALE game gymnasium knows."""
    import gymnasium

    import_ale()
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error as exc:
        raise errors.UnknownEnvError(
            f"unknown Atari env {env_id!r}: {exc}. Use an ALE id such as 'ALE/Pong-v5' or "
            "'PongNoFrameskip-v4'") from exc
    if not str(spec.entry_point).startswith("ale_py"):
        raise errors.UnknownEnvError(
            f"{env_id!r} is not an Atari env (its entry point is {spec.entry_point}); the "
            f"'{ATARI_PREFIX}' prefix takes ALE ids such as 'ALE/Pong-v5'")


def make_atari(env_id: str, env_config: Optional[dict] = None) -> Any:
    """The preprocessed Atari env of the module docstring.

    Raises:
      UnknownEnvError: ale-py is not installed or `env_id` is not an ALE game.
      InvalidConfigError: a preprocessing key out of range.
    """
    import gymnasium
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    import_ale()
    config = dict(env_config or {})
    options = {key: config.pop(key, default) for key, default in PREPROCESSING_DEFAULTS.items()}
    for key in ("frame_stack", "screen_size", "frame_skip"):
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise errors.InvalidConfigError(
                f"atari env {env_id!r}: env_config[{key!r}] must be an integer >= 1, got {value!r}")
    if isinstance(options["noop_max"], bool) or not isinstance(options["noop_max"], int) \
            or options["noop_max"] < 0:
        raise errors.InvalidConfigError(
            f"atari env {env_id!r}: env_config['noop_max'] must be an integer >= 0, got "
            f"{options['noop_max']!r}")
    check_ale_id(env_id)
    # frame skipping happens in AtariPreprocessing (with max-pooling of the last two frames)
    env = gymnasium.make(env_id, frameskip=1, **config)
    env = AtariPreprocessing(env, noop_max=options["noop_max"], frame_skip=options["frame_skip"],
                             screen_size=options["screen_size"],
                             terminal_on_life_loss=bool(options["terminal_on_life_loss"]),
                             grayscale_obs=True, scale_obs=False)
    env = FrameStackObservation(env, options["frame_stack"])
    return channels_last(env)


@dataclasses.dataclass(frozen=True)
class AtariEnvCreator:
    """A picklable `creator(env_config)` of the preprocessed Atari env `env_id`."""

    env_id: str

    def __call__(self, env_config: Optional[dict] = None) -> Any:
        return make_atari(self.env_id, env_config)

    def check(self) -> None:
        """Raises UnknownEnvError when ale-py is missing or the id names no ALE game."""
        check_ale_id(self.env_id)


def atari_env_id(name: str) -> Optional[str]:
    """The ALE id behind an env name: the part after `atari:`, the name itself for an ALE id
    (any `ALE/...` name, so that a missing ale-py is reported as such), None for anything
    else."""
    if name.startswith(ATARI_PREFIX):
        return name[len(ATARI_PREFIX):]
    if name.startswith("ALE/") or is_ale_id(name):
        return name
    return None
