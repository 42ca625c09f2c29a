"""Callbacks: user hooks into rollouts (RLlib's classic `DefaultCallbacks`).

A rollout worker calls these at fixed points of sampling, and the trainer calls
`on_train_result` after every training iteration. Subclass `DefaultCallbacks` and pass the
class (or an instance) as config["callbacks"]; Ray 0.8's dict of functions
(`{"on_episode_end": fn, ...}`, each called with one `info` dict) is accepted too
(LegacyCallbacks). Every hook receives keyword arguments only
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

    def on_train_result(self, *, trainer: Any, result: dict, **kwargs) -> None:
        """At the end of `Trainer.train()`, on the trainer's process; may add keys to
        `result`."""


# Ray 0.8's callback names -> (DefaultCallbacks hook, the info dict's entries from its keywords)
_LEGACY_HOOKS = {
    "on_episode_start": ("on_episode_start", lambda kw: {
        "env": kw["base_env"], "policy": kw["policies"], "episode": kw["episode"]}),
    "on_episode_step": ("on_episode_step", lambda kw: {
        "env": kw["base_env"], "episode": kw["episode"]}),
    "on_episode_end": ("on_episode_end", lambda kw: {
        "env": kw["base_env"], "policy": kw["policies"], "episode": kw["episode"]}),
    "on_postprocess_traj": ("on_postprocess_trajectory", lambda kw: {
        "episode": kw["episode"], "agent_id": kw["agent_id"],
        "pre_batch": kw["original_batches"].get(kw["agent_id"]),
        "post_batch": kw["postprocessed_batch"], "all_pre_batches": kw["original_batches"]}),
    "on_sample_end": ("on_sample_end", lambda kw: {
        "worker": kw["worker"], "samples": kw["samples"]}),
    "on_train_result": ("on_train_result", lambda kw: {
        "trainer": kw["trainer"], "result": kw["result"]}),
}


class LegacyCallbacks(DefaultCallbacks):
    """Ray 0.8's callbacks, a dict of functions each taking one `info` dict, as hooks: only the
    hooks the dict names are set (so the samplers skip the others)."""

    def __init__(self, functions: dict):
        from tfrl import errors

        unknown = sorted(set(functions) - set(_LEGACY_HOOKS))
        if unknown:
            raise errors.InvalidConfigError(
                f"config['callbacks'] names unknown callback(s) {unknown}; the classic ones are "
                f"{sorted(_LEGACY_HOOKS)}")
        self.functions = dict(functions)
        for name, function in self.functions.items():
            if function is None:
                continue
            hook, info = _LEGACY_HOOKS[name]

            def call(_function=function, _info=info, **kwargs):
                _function(_info(kwargs))

            setattr(self, hook, call)


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

    def on_train_result(self, **kwargs):
        for c in self.callbacks:
            c.on_train_result(**kwargs)


def make_callbacks(spec: Any) -> DefaultCallbacks:
    """Returns a callbacks object for config["callbacks"]: None, a class, an instance, a list of
    them, or Ray 0.8's dict of functions.

    Raises:
      InvalidConfigError: `spec` is none of these.
    """
    from tfrl import errors

    if spec is None:
        return DefaultCallbacks()
    if isinstance(spec, (list, tuple)):
        return MultiCallbacks(spec)
    if isinstance(spec, dict):
        return LegacyCallbacks(spec)
    if isinstance(spec, type) and issubclass(spec, DefaultCallbacks):
        return spec()
    if isinstance(spec, DefaultCallbacks):
        return spec
    raise errors.InvalidConfigError(
        f"config['callbacks'] must be a DefaultCallbacks subclass, an instance of one, a list of "
        f"them or a dict of classic callback functions; got {spec!r}")


def overrides_hook(callbacks: DefaultCallbacks, hook: str) -> bool:
    """Whether `callbacks` (or one of a MultiCallbacks' members) implements `hook` itself.

    The samplers skip per-env work for hooks that would do nothing.
    """
    if isinstance(callbacks, MultiCallbacks):
        return any(overrides_hook(c, hook) for c in callbacks.callbacks)
    if hook in vars(callbacks):
        return True
    return getattr(type(callbacks), hook, None) is not getattr(DefaultCallbacks, hook)
