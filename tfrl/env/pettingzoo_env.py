"""ParallelPettingZooEnv: a PettingZoo parallel env seen as a tfrl `MultiAgentEnv`.

PettingZoo (the `pettingzoo` extra) is the common API of multi-agent environments. Its parallel
envs already speak in dicts keyed by agent and follow gymnasium's step semantics; what tfrl's
multi-agent runner (tfrl/rollout/multi_agent_sampler.py) needs in addition is the
`"__all__"` key, which ends the episode for every agent. A PettingZoo episode ends when no agent
is left in `env.agents`; it is "truncated" when any agent was truncated in it, else
"terminated". Spaces come from the env's `observation_space(agent)` / `action_space(agent)`.
The adapter only calls the env's methods, so it imports nothing from pettingzoo itself.
"""
from __future__ import annotations

from typing import Any, Optional

from tfrl import errors
from tfrl.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv


class ParallelPettingZooEnv(MultiAgentEnv):
    """Wraps a PettingZoo `ParallelEnv` (RLlib classic's name for this adapter).

    Register it as an env, e.g.
    `register_env("pistonball", lambda cfg: ParallelPettingZooEnv(pistonball_v6.parallel_env()))`.

    Raises (constructor):
      InvalidEnvError: the object is not a PettingZoo parallel env (no `possible_agents`,
        `reset`, `step`, `observation_space` or `action_space`).
    """

    def __init__(self, env: Any):
        missing = [name for name in ("possible_agents", "reset", "step", "observation_space",
                                     "action_space") if not hasattr(env, name)]
        if missing:
            raise errors.InvalidEnvError(
                f"ParallelPettingZooEnv needs a PettingZoo ParallelEnv (e.g. "
                f"module.parallel_env()); {type(env).__name__} has no {missing}. Convert an AEC "
                "env with pettingzoo.utils.conversions.aec_to_parallel first.")
        self.par_env = env
        self.possible_agents = list(env.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
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
