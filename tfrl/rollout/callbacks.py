"""Callbacks: user hooks into rollouts (RLlib's classic `DefaultCallbacks`).

A rollout worker calls these at fixed points of sampling. Subclass `DefaultCallbacks` and pass
the class (or an instance) as config["callbacks"]. Every hook receives keyword arguments only
and should accept `**kwargs`, so new arguments never break old callbacks. Values put into
`episode.custom_metrics` are reported with each finished episode (metrics.py).
"""
from __future__ import annotations

from typing import Any


class DefaultCallbacks:
    """Hooks called by `RolloutWorker`; the default implementations do nothing."""

    def on_episode_start(self, *, worker: Any, base_env: Any, policies: dict, episode: Any,
                         env_index: int, **kwargs) -> None:
        """After an env was reset and before its first action."""

    def on_episode_step(self, *, worker: Any, base_env: Any, episode: Any, env_index: int,
                        **kwargs) -> None:
        """After every env step of a running episode (not after the last one)."""

    def on_episode_end(self, *, worker: Any, base_env: Any, policies: dict, episode: Any,
                       env_index: int, **kwargs) -> None:
        """When an episode terminated or was truncated, before its metrics are recorded."""

    def on_postprocess_trajectory(self, *, worker: Any, episode: Any, agent_id: Any,
                                  policy_id: str, policies: dict, postprocessed_batch: Any,
                                  original_batches: dict, **kwargs) -> None:
        """After the policy postprocessed one agent's trajectory; may edit the batch in place."""

    def on_sample_end(self, *, worker: Any, samples: Any, **kwargs) -> None:
        """At the end of `RolloutWorker.sample()`, with the batch it returns."""


class MultiCallbacks(DefaultCallbacks):
    """Runs several callbacks objects in order."""

    def __init__(self, callbacks):
        self.callbacks = [c() if isinstance(c, type) else c for c in callbacks]

    def on_episode_start(self, **kwargs):
        for c in self.callbacks:
            c.on_episode_start(**kwargs)

    def on_episode_step(self, **kwargs):
        for c in self.callbacks:
            c.on_episode_step(**kwargs)

    def on_episode_end(self, **kwargs):
        for c in self.callbacks:
            c.on_episode_end(**kwargs)

    def on_postprocess_trajectory(self, **kwargs):
        for c in self.callbacks:
            c.on_postprocess_trajectory(**kwargs)

    def on_sample_end(self, **kwargs):
        for c in self.callbacks:
            c.on_sample_end(**kwargs)


def make_callbacks(spec: Any) -> DefaultCallbacks:
    """Returns a callbacks object for config["callbacks"]: None, a class, an instance or a list.

    Raises:
      InvalidConfigError: `spec` is none of these.
    """
    from tfrl import errors

    if spec is None:
        return DefaultCallbacks()
    if isinstance(spec, (list, tuple)):
        return MultiCallbacks(spec)
    if isinstance(spec, type) and issubclass(spec, DefaultCallbacks):
        return spec()
    if isinstance(spec, DefaultCallbacks):
        return spec
    raise errors.InvalidConfigError(
        f"config['callbacks'] must be a DefaultCallbacks subclass, an instance of one or a list of "
        f"them; got {spec!r}")


def overrides_hook(callbacks: DefaultCallbacks, hook: str) -> bool:
    """Whether `callbacks` (or one of a MultiCallbacks' members) implements `hook` itself.

    The samplers skip per-env work for hooks that would do nothing.
    """
    if isinstance(callbacks, MultiCallbacks):
        return any(overrides_hook(c, hook) for c in callbacks.callbacks)
    if hook in vars(callbacks):
        return True
    return getattr(type(callbacks), hook, None) is not getattr(DefaultCallbacks, hook)
