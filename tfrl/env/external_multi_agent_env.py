"""ExternalMultiAgentEnv: an ExternalEnv whose calls carry one value per agent.

RLlib classic's ExternalMultiAgentEnv. Its `run()` (a thread the worker starts) owns the loop
and speaks in dicts keyed by agent id:

    episode_id = self.start_episode()
    actions = self.get_action(episode_id, {"a": obs_a, "b": obs_b})   # {"a": ..., "b": ...}
    self.log_returns(episode_id, {"a": 1.0, "b": -1.0})                # any number of times
    self.log_action(episode_id, {"a": obs_a}, {"a": action_a})         # actions chosen here
    self.end_episode(episode_id, {"a": obs_a, "b": obs_b})            # final observations

Only the agents in an observation dict act at that step (as in `MultiAgentEnv`). The worker maps
each agent to a policy with the trainer's `multiagent` config (`policies`,
`policy_mapping_fn`), builds the policies from `observation_spaces` / `action_spaces` (agent id
-> gymnasium space), and samples the env with `ExternalMultiAgentEnvRunner`
(tfrl/rollout/external_multi_agent_sampler.py), which returns MultiAgentBatch fragments keyed by
policy id. Every call is checked here, in the caller's thread (an unknown agent id, a value
outside its agent's space, an unknown or finished episode id), before anything is queued.
`tfrl.serving.MultiAgentPolicyServer` is this env served over gRPC.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Optional

from tfrl import errors
from tfrl.env.external_env import (END, OBSERVATION, REWARD, ActionReply, ExternalEnv,
                                   _as_space_value, _finite_reward, _short)
from tfrl.env.multi_agent_env import MultiAgentEnv


class ExternalMultiAgentEnv(ExternalEnv, MultiAgentEnv):
    """A multi-agent env whose own thread asks the worker's policies for actions; see the module
    docstring.

    Args:
      action_spaces, observation_spaces: dicts agent id -> gymnasium space, the same agent ids
        in both.
      max_concurrent, action_timeout_s: as `ExternalEnv`'s.

    Raises:
      InvalidEnvError: the spaces are not two dicts over the same, non-empty set of agent ids.
    """

    def __init__(self, action_spaces: Dict[Hashable, Any], observation_spaces: Dict[Hashable, Any],
                 max_concurrent: int = 100, action_timeout_s: Optional[float] = None):
        if not isinstance(action_spaces, dict) or not isinstance(observation_spaces, dict) \
                or not action_spaces or set(action_spaces) != set(observation_spaces):
            raise errors.InvalidEnvError(
                f"{type(self).__name__} needs action_spaces and observation_spaces as dicts agent "
                "id -> gymnasium space over the same agent ids, got "
                f"{_keys(action_spaces)} and {_keys(observation_spaces)}")
        super().__init__(None, None, max_concurrent=max_concurrent,
                         action_timeout_s=action_timeout_s)
        self.action_spaces = dict(action_spaces)
        self.observation_spaces = dict(observation_spaces)
        self.possible_agents = list(observation_spaces)

    # --- the application's side -------------------------------------------------------------
    def get_action(self, episode_id: str, observation_dict: Dict[Hashable, Any],
                   reward_dict: Optional[Dict[Hashable, float]] = None) -> Dict[Hashable, Any]:
        """The policies' actions for the agents in `observation_dict` (a dict with the same
        keys); blocks until the worker answers. `reward_dict`: rewards earned since the
        previous call, logged first (as `log_returns` would), once the call is checked.

        Raises:
          ExternalEnvError: an empty dict, an unknown agent id, an unknown or finished episode,
            a bad reward, or the env closed.
          ActionTimeoutError: no answer within `action_timeout_s`.
          InvalidObservationError: an observation outside its agent's observation space.
        """
        return super().get_action(episode_id, observation_dict, reward_dict)

    def log_action(self, episode_id: str, observation_dict: Dict[Hashable, Any],
                   action_dict: Dict[Hashable, Any],
                   reward_dict: Optional[Dict[Hashable, float]] = None) -> None:
        """Records actions the application took itself, one for each agent of
        `observation_dict`; `reward_dict` as in `get_action`.

        Raises:
          ExternalEnvError: dicts over different agents, an unknown agent id, an unknown or
            finished episode, a bad reward, or the env closed.
          InvalidObservationError, ActionOutOfSpaceError: a value outside its agent's space.
        """
        if not isinstance(action_dict, dict) or not isinstance(observation_dict, dict) \
                or set(action_dict) != set(observation_dict):
            raise errors.ExternalEnvError(
                f"log_action needs an action for each agent of the observation dict and no other: "
                f"observations for {_keys(observation_dict)}, actions for {_keys(action_dict)}")
        actions = {agent: self._checked_value(agent, action, self.action_spaces, "action",
                                              errors.ActionOutOfSpaceError)
                   for agent, action in action_dict.items()}
        self._queue_observation(episode_id, observation_dict, None, actions, reward_dict)

    def log_actions(self, episode_id: str, observations: Any, actions: Any,
                    rewards: Any = None) -> None:
        """Not offered by a multi-agent env: log each step with `log_action`.

        Raises:
          NotSupportedError: always.
        """
        raise errors.NotSupportedError(
            "log_actions (several steps at once) is single-agent only; a multi-agent env takes "
            "one log_action per step")

    def log_returns(self, episode_id: str, reward_dict: Dict[Hashable, float],
                    info_dict: Optional[Dict[Hashable, dict]] = None) -> None:
        """Adds each agent's reward to its current step (several calls add up); `info_dict`
        (agent id -> info) is kept as the agents' last info.

        Raises:
          ExternalEnvError: an unknown agent id, a reward that is not a finite number, an
            unknown or finished episode, or the env closed.
        """
        rewards = self._checked_rewards(reward_dict)
        if info_dict is not None:
            if not isinstance(info_dict, dict):
                raise errors.ExternalEnvError(
                    f"info_dict must be a dict agent id -> info, got {type(info_dict).__name__}")
            for agent in info_dict:
                self._space_of(agent, self.observation_spaces)
        with self._lock:
            self._check_running(episode_id)
            self._put_event(episode_id, (REWARD, episode_id, rewards, info_dict))

    def end_episode(self, episode_id: str, observation_dict: Dict[Hashable, Any],
                    truncated: bool = False,
                    reward_dict: Optional[Dict[Hashable, float]] = None) -> None:
        """Ends the episode with the agents' final observations (an agent not in the dict ends
        with its last one): terminated, or with `truncated` cut short (training bootstraps from
        the observations' values); `reward_dict` as in `get_action`.

        Raises:
          ExternalEnvError: an unknown agent id, an unknown or finished episode, a bad reward,
            or the env closed.
          InvalidObservationError: an observation outside its agent's observation space.
        """
        observations = self._checked_observations(observation_dict, allow_empty=True)
        rewards = self._checked_rewards(reward_dict)
        with self._lock:
            self._check_running(episode_id)
            del self._running[episode_id]
            self._put_reward(episode_id, rewards)
            self._put_event(episode_id, (END, episode_id, observations, bool(truncated)))

    # --- checks ---------------------------------------------------------------------------------
    def _space_of(self, agent: Hashable, spaces: Dict[Hashable, Any]):
        try:
            return spaces[agent]
        except (KeyError, TypeError):
            raise errors.ExternalEnvError(
                f"unknown agent id {agent!r}; this env's agents are {self.possible_agents} (its "
                "observation_spaces / action_spaces)") from None

    def _checked_observations(self, observation_dict: Any, allow_empty: bool = False) -> dict:
        if not isinstance(observation_dict, dict) or not (observation_dict or allow_empty):
            raise errors.ExternalEnvError(
                "the observations must be a non-empty dict agent id -> observation, got "
                f"{type(observation_dict).__name__} {_keys(observation_dict)}")
        return {agent: self._checked_value(agent, obs, self.observation_spaces, "observation",
                                           errors.InvalidObservationError)
                for agent, obs in observation_dict.items()}

    def _checked_value(self, agent: Hashable, value: Any, spaces: Dict[Hashable, Any], what: str,
                       error: type) -> Any:
        space = self._space_of(agent, spaces)
        converted = _as_space_value(value, space)
        if converted is None or not space.contains(converted):
            raise error(
                f"the {what} {_short(value)} of agent {agent!r} is not in its {what} space "
                f"{space}; send values of that space (dtype and shape included)")
        return converted

    def _checked_rewards(self, reward_dict: Any) -> Dict[Hashable, float]:
        if reward_dict is None:
            return {}
        if not isinstance(reward_dict, dict):
            raise errors.ExternalEnvError(
                f"rewards must be a dict agent id -> number, got {type(reward_dict).__name__}")
        rewards = {}
        for agent, reward in reward_dict.items():
            self._space_of(agent, self.observation_spaces)
            rewards[agent] = _finite_reward(reward)
        return rewards

    def _put_reward(self, episode_id: str, rewards: Dict[Hashable, float]) -> None:
        if any(rewards.values()):
            self._put_event(episode_id, (REWARD, episode_id, rewards, None))

    def _queue_observation(self, episode_id: str, observation_dict: Any,
                           reply: Optional[ActionReply], action: Any, reward: Any) -> None:
        observations = self._checked_observations(observation_dict)
        rewards = self._checked_rewards(reward)
        with self._lock:
            self._check_running(episode_id)
            self._put_reward(episode_id, rewards)
            self._put_event(episode_id, (OBSERVATION, episode_id, observations, reply, action))


def _keys(value: Any) -> str:
    return str(sorted(map(repr, value))) if isinstance(value, dict) else type(value).__name__
