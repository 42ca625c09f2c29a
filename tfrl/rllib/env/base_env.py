"""Classic `ray.rllib.env.base_env.BaseEnv` and `vector_env.VectorEnv` as names only: classic
code annotates its callbacks with them (`base_env: BaseEnv`), so they import, but tfrl's rollout
workers step gymnasium envs (batched in one process with num_envs_per_worker), MultiAgentEnv and
the external envs, not environments driven through `poll` / `send_actions`; an instance of a
subclass is refused when it is made."""
from tfrl.errors import NotSupportedError


class _NotSampled:
    def __new__(cls, *args, **kwargs):
        raise NotSupportedError(
            f"{cls.__name__} derives from classic RLlib's {cls._classic_name}, which tfrl's "
            "rollout workers do not sample from; wrap the environment as a gymnasium.Env or a "
            "MultiAgentEnv instead (README, 'Coming from RLlib')")


class BaseEnv(_NotSampled):
    """Classic RLlib's BaseEnv, for annotations (module docstring)."""

    _classic_name = "BaseEnv"


class VectorEnv(_NotSampled):
    """Classic RLlib's VectorEnv, for annotations (module docstring)."""

    _classic_name = "VectorEnv"


__all__ = ["BaseEnv", "VectorEnv"]
