"""The multi-agent environment interface used by rollout workers (tfrl/rollout).

A `MultiAgentEnv` speaks in dicts keyed by agent id, following gymnasium's step semantics:
`reset` returns `(obs, infos)`; `step(action_dict)` returns `(obs, rewards, terminateds,
truncateds, infos)`, where `terminateds`/`truncateds` carry the special key `"__all__"` that ends
the episode for every agent. Only agents present in `obs` act at the next step. The worker maps
each agent to a policy with `policy_mapping_fn(agent_id)`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Optional, Tuple

from tfrl import errors
from tfrl.env.registry import resolve_env_creator

AgentID = Hashable
ALL_AGENTS = "__all__"


class MultiAgentEnv:
    """Base class of multi-agent environments.

    Subclasses set `possible_agents` (a list of agent ids), `observation_spaces` and
    `action_spaces` (dicts agent id -> gymnasium space) and implement `reset` and `step`.

    Classic RLlib's form is accepted too: no dicts, but one `observation_space` /
    `action_space` attribute that every agent shares, or no spaces at all when the policy specs
    of `config["multiagent"]["policies"]` give them (a rollout worker takes a policy's spaces
    from its spec, else from the agents mapped to it, else from these two attributes).
    """

    possible_agents: list = []
    observation_spaces: Dict[AgentID, Any] = {}
    action_spaces: Dict[AgentID, Any] = {}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None
              ) -> Tuple[Dict[AgentID, Any], Dict[AgentID, dict]]:
        raise NotImplementedError

    def step(self, action_dict: Dict[AgentID, Any]) -> Tuple[dict, dict, dict, dict, dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def get_observation_space(self, agent_id: AgentID):
        """The observation space of `agent_id`.

        The entry of `observation_spaces`, else the shared `observation_space`.

        Raises:
          UnsupportedSpaceError: the env declares neither for that agent.
        """
        return self._declared_space(agent_id, "observation")

    def get_action_space(self, agent_id: AgentID):
        """The action space of `agent_id`.

        The entry of `action_spaces`, else the shared `action_space`.

        Raises:
          UnsupportedSpaceError: the env declares neither for that agent.
        """
        return self._declared_space(agent_id, "action")

    def _declared_space(self, agent_id: AgentID, kind: str):
        per_agent = getattr(self, f"{kind}_spaces", None) or {}
        if agent_id in per_agent:
            return per_agent[agent_id]
        shared = getattr(self, f"{kind}_space", None)
        if shared is not None:
            return shared
        raise errors.UnsupportedSpaceError(
            f"{type(self).__name__} declares no {kind} space for agent {agent_id!r}: add it to "
            f"{kind}_spaces (known agents: {list(per_agent)}) or set {kind}_space, the space "
            "every agent shares")


class IndependentCopiesEnv(MultiAgentEnv):
    """`num_agents` independent copies of one single-agent env, agent `i` stepping copy `i`.

    An agent that terminates or truncates stops acting; the episode ends when every copy has
    ended (a truncation of `"__all__"` when any copy was truncated and none terminated since).
    `env_creator` is called once per copy with `env_config`; the copies must have gymnasium's API
    (a ResolvedEnvCreator adapts classic ones).
    """

    def __init__(self, env_creator: Callable[[Any], Any], num_agents: int,
                 env_config: Optional[dict] = None):
        self.envs = [env_creator(env_config) for _ in range(num_agents)]
        self.possible_agents = list(range(num_agents))
        self.observation_spaces = {i: e.observation_space for i, e in enumerate(self.envs)}
        self.action_spaces = {i: e.action_space for i, e in enumerate(self.envs)}
        self._done = set()
        self._truncated = set()

    def reset(self, *, seed=None, options=None):
        self._done = set()
        self._truncated = set()
        obs, infos = {}, {}
        for i, env in enumerate(self.envs):
            obs[i], infos[i] = env.reset(seed=None if seed is None else seed + i, options=options)
        return obs, infos

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for i, action in action_dict.items():
            obs[i], rewards[i], terminateds[i], truncateds[i], infos[i] = self.envs[i].step(action)
            if terminateds[i] or truncateds[i]:
                self._done.add(i)
            if truncateds[i] and not terminateds[i]:
                self._truncated.add(i)
        all_done = len(self._done) == len(self.envs)
        truncateds[ALL_AGENTS] = all_done and bool(self._truncated)
        terminateds[ALL_AGENTS] = all_done and not truncateds[ALL_AGENTS]
        return obs, rewards, terminateds, truncateds, infos

    def close(self):
        for env in self.envs:
            env.close()


def make_multi_agent(env_creator: Callable[[dict], Any], num_agents: int = 2) -> type:
    """Returns a `MultiAgentEnv` class running `num_agents` independent copies of a gymnasium env
    (an `IndependentCopiesEnv`). `env_creator` is a gymnasium id or a callable(env_config)."""
    creator = resolve_env_creator(env_creator)

    class IndependentCopies(IndependentCopiesEnv):
        def __init__(self, env_config: Optional[dict] = None):
            super().__init__(creator, num_agents, env_config)

    IndependentCopies.__name__ = f"MultiAgent{num_agents}x{creator.name}"
    IndependentCopies.__qualname__ = IndependentCopies.__name__
    return IndependentCopies
