"""PettingZoo envs seen as tfrl `MultiAgentEnv`s: `ParallelPettingZooEnv` and `PettingZooEnv`.

PettingZoo (the `pettingzoo` extra) is the common API of multi-agent environments, in two forms.
Its parallel envs already speak in dicts keyed by agent and follow gymnasium's step semantics;
what tfrl's multi-agent runner (tfrl/rollout/multi_agent_sampler.py) needs in addition is the
`"__all__"` key, which ends the episode for every agent. Its AEC envs (agent-environment cycle)
are turn-based: one agent, `env.agent_selection`, acts at a time, and `env.last()` gives that
agent's observation and the reward it collected since it last acted. `PettingZooEnv` (classic
RLlib 1.x's adapter) turns them into dicts holding only the agent to act, which is all the
runner needs: only agents that got an observation act, and an agent's reward reaches the row of
its last action when it observes again (or when it is done).

A PettingZoo episode ends when no agent is left in `env.agents`; it is "truncated" when any agent
was truncated in it, else "terminated". Spaces come from the env's `observation_space(agent)` /
`action_space(agent)`; when every agent has the same ones they are also the shared
`observation_space` / `action_space` attributes that classic code reads. The adapters only call
the env's methods, so they import nothing from pettingzoo itself.
"""
from __future__ import annotations

from typing import Any, Optional

from tfrl import errors
from tfrl.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv


def _missing(env: Any, methods: tuple) -> list:
    """The names in `methods` that `env` lacks (`possible_agents` is an attribute, the rest are
    methods)."""
    return [name for name in methods if not hasattr(env, name)
            or (name != "possible_agents" and not callable(getattr(env, name)))]


class _PettingZooAdapter(MultiAgentEnv):
    """The spaces both adapters read from a PettingZoo env (module docstring)."""

    def _read_spaces(self, env: Any) -> None:
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
        for kind, spaces in (("observation", self.observation_spaces),
                             ("action", self.action_spaces)):
            values = list(spaces.values())
            if values and all(space == values[0] for space in values):
                setattr(self, f"{kind}_space", values[0])

    def __getattr__(self, name: str) -> Any:
        # called only when normal lookup fails: a shared space the agents do not have
        if name in ("observation_space", "action_space") and "possible_agents" in vars(self):
            kind = name[:-len("_space")]
            raise AttributeError(
                f"{type(self).__name__}.{name}: the agents of this PettingZoo env have different "
                f"{kind} spaces, so there is no shared one; read get_{kind}_space(agent_id) (or "
                f"{name}s[agent_id]), or give each policy its spaces in its policy spec")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class ParallelPettingZooEnv(_PettingZooAdapter):
    """Wraps a PettingZoo `ParallelEnv` (RLlib classic's name for this adapter).

    Register it as an env, e.g.
    `register_env("pistonball", lambda cfg: ParallelPettingZooEnv(pistonball_v6.parallel_env()))`.

    Raises (constructor):
      InvalidEnvError: the object is not a PettingZoo parallel env (no `possible_agents`,
        `reset`, `step`, `observation_space` or `action_space`), or is an AEC env (it has
        `last`: wrap it in `PettingZooEnv`).
    """

    def __init__(self, env: Any):
        missing = _missing(env, ("possible_agents", "reset", "step", "observation_space",
                                 "action_space"))
        if missing:
            raise errors.InvalidEnvError(
                f"ParallelPettingZooEnv needs a PettingZoo ParallelEnv (e.g. "
                f"module.parallel_env()); {type(env).__name__} has no {missing}. Convert an AEC "
                "env with pettingzoo.utils.conversions.aec_to_parallel first.")
        if callable(getattr(env, "last", None)):
            raise errors.InvalidEnvError(
                f"ParallelPettingZooEnv needs a PettingZoo ParallelEnv, but {type(env).__name__} "
                "is an AEC env (it has last()); wrap it in PettingZooEnv (turn-based), or "
                "convert it with pettingzoo.utils.conversions.aec_to_parallel first.")
        self.par_env = env
        self._read_spaces(env)
        self._truncated = False

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        self._truncated = False
        obs, infos = self.par_env.reset(seed=seed, options=options)
        return obs, infos or {}

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = self.par_env.step(action_dict)
        terminateds, truncateds = dict(terminateds), dict(truncateds)
        self._truncated = self._truncated or any(
            truncateds.get(a, False) and not terminateds.get(a, False) for a in truncateds)
        episode_over = not self.par_env.agents
        truncateds[ALL_AGENTS] = episode_over and self._truncated
        terminateds[ALL_AGENTS] = episode_over and not self._truncated
        return obs, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        self.par_env.close()

    def render(self):
        return self.par_env.render()


class PettingZooEnv(_PettingZooAdapter):
    """Wraps a PettingZoo `AECEnv`, a turn-based env (classic RLlib 1.x's `PettingZooEnv`).

    Register it as an env, e.g.
    `register_env("ttt", lambda cfg: PettingZooEnv(tictactoe_v3.env()))`.

    `reset` returns the observation of the agent to act (`env.agent_selection`) only; `step`
    takes that agent's action (`{agent: action}`), steps the env with it, and returns the
    observation of the next agent to act. Agents that are done on the way (terminated or
    truncated) are reported too, with their final observation, reward and done flags, and
    stepped out of the env with the action `None`, as PettingZoo asks; the episode ends for all
    (`"__all__"`) when no agent is left. Each reported reward is the one `env.last()` gives, the
    reward the agent collected since it last acted, so every reward is reported once, to its
    agent, including the agents that did not make the final move.

    Raises (constructor):
      InvalidEnvError: the object is not a PettingZoo AEC env (no `possible_agents`, `reset`,
        `step`, `last`, `observation_space` or `action_space`).
    """

    def __init__(self, env: Any):
        missing = _missing(env, ("possible_agents", "reset", "step", "last", "observation_space",
                                 "action_space"))
        if missing:
            parallel = not _missing(env, ("possible_agents", "reset", "step"))
            advice = ("This looks like a PettingZoo ParallelEnv: wrap it in "
                      "ParallelPettingZooEnv instead." if parallel and "last" in missing else
                      "Pass an AEC env (e.g. module.env()), or convert a parallel one with "
                      "pettingzoo.utils.conversions.parallel_to_aec first.")
            raise errors.InvalidEnvError(
                f"PettingZooEnv needs a PettingZoo AECEnv (e.g. module.env()); "
                f"{type(env).__name__} has no {missing}. {advice}")
        self.env = env
        self._read_spaces(env)
        self._truncated = False

    @property
    def aec_env(self) -> Any:
        """The wrapped AEC env (RLlib 1.0's name; later 1.x versions call it `env`)."""
        return self.env

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """Resets the AEC env; returns `({agent to act: obs}, {agent to act: info})`.

        Raises:
          EnvError: the env steps dead agents with `None` without removing them.
        """
        self._truncated = False
        self.env.reset(seed=seed, options=options)
        obs, _rewards, _terminateds, _truncateds, infos = self._collect()
        return obs, infos

    def step(self, action_dict):
        """Steps the AEC env with the action of the agent to act; returns tfrl's five dicts
        (module and class docstrings).

        Raises:
          EnvError: `action_dict` holds no action of the agent to act, or actions of other
            agents too (only the agent that observed last may act), or the episode is over
            (call reset()), or the env steps dead agents without removing them.
        """
        if not self.env.agents:
            raise errors.EnvError(
                "PettingZooEnv.step: the episode is over (no agent is left in the AEC env); call "
                "reset() first")
        agent = self.env.agent_selection
        if agent not in action_dict or len(action_dict) != 1:
            raise errors.EnvError(
                f"PettingZooEnv.step: the AEC env waits for the action of agent {agent!r} only "
                f"(its turn), got actions of {list(action_dict)}; act with exactly the agents of "
                "the last observation dict")
        self.env.step(action_dict[agent])
        obs, rewards, terminateds, truncateds, infos = self._collect()
        episode_over = not self.env.agents
        truncateds[ALL_AGENTS] = episode_over and self._truncated
        terminateds[ALL_AGENTS] = episode_over and not self._truncated
        return obs, rewards, terminateds, truncateds, infos

    def _collect(self) -> tuple:
        """Reads `env.last()` of the agents done now, stepping each out with `None`, and of the
        next agent to act; returns (obs, rewards, terminateds, truncateds, infos) of them."""
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        while self.env.agents:
            agent = self.env.agent_selection
            obs[agent], rewards[agent], terminated, truncated, infos[agent] = self._last()
            terminateds[agent], truncateds[agent] = bool(terminated), bool(truncated)
            if not (terminated or truncated):
                break
            self._truncated = self._truncated or not terminated
            self.env.step(None)
            if agent in self.env.agents:
                raise errors.EnvError(
                    f"PettingZooEnv: stepping the done agent {agent!r} with None left it in "
                    f"env.agents of {type(self.env).__name__}; the AEC env's step() must remove "
                    "a done agent (PettingZoo's AECEnv._was_dead_step does)")
        return obs, rewards, terminateds, truncateds, infos

    def _last(self) -> tuple:
        """`env.last()` as (obs, reward, terminated, truncated, info); PettingZoo before 1.22
        gave (obs, reward, done, info), a done read as a termination."""
        result = tuple(self.env.last())
        if len(result) == 4:
            obs, reward, done, info = result
            return obs, reward, done, False, info
        return result

    def close(self) -> None:
        self.env.close()

    def render(self):
        return self.env.render()
