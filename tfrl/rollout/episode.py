"""Episode: the record of one running episode of one env of a rollout worker.

The samplers (sampler.py, multi_agent_sampler.py) keep one `Episode` per env and hand it, up to
date, to the callbacks (callbacks.py), which can store their own values in `user_data`, `custom_metrics` and
`hist_data`. When the episode ends its totals become one `RolloutMetrics` (metrics.py).
"""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Dict, Hashable, Optional


class Episode:
    """Totals and user data of one episode.

    Attributes:
      episode_id: a random 63-bit id, also written to the `eps_id` column of its rows.
      env_index: which of the worker's envs plays it.
      length: env steps so far; total_reward: sum of the (unclipped) rewards of all agents.
      agent_rewards: (agent_id, policy_id) -> summed reward.
      custom_metrics: name -> number, reported by `get_metrics` (mean/min/max over episodes).
      hist_data: name -> list of numbers, reported as histograms.
      user_data: free space for callbacks.
    """

    def __init__(self, env_index: int, policy_mapping_fn=None):
        self.episode_id = random.getrandbits(63)
        self.env_index = env_index
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards: Dict[tuple, float] = defaultdict(float)
        self.custom_metrics: Dict[str, float] = {}
        self.hist_data: Dict[str, list] = {}
        self.user_data: Dict[str, Any] = {}
        self._policy_mapping_fn = policy_mapping_fn
        self._agent_to_policy: Dict[Hashable, str] = {}
        self._last_infos: Dict[Hashable, dict] = {}
        self._last_observations: Dict[Hashable, Any] = {}
        self._last_actions: Dict[Hashable, Any] = {}

    def policy_for(self, agent_id: Hashable) -> str:
        """The policy id acting for `agent_id` in this episode (fixed at its first step)."""
        policy_id = self._agent_to_policy.get(agent_id)
        if policy_id is None:
            policy_id = self._policy_mapping_fn(agent_id)
            self._agent_to_policy[agent_id] = policy_id
        return policy_id

    def last_info_for(self, agent_id: Hashable = 0) -> Optional[dict]:
        return self._last_infos.get(agent_id)

    def last_observation_for(self, agent_id: Hashable = 0) -> Any:
        return self._last_observations.get(agent_id)

    def last_raw_obs_for(self, agent_id: Hashable = 0) -> Any:
        """Classic RLlib's unfiltered last observation. tfrl's policies preprocess inside their
        models, so this is `last_observation_for`, the observation the policy saw: the env's
        own unless an observation_filter is set."""
        return self.last_observation_for(agent_id)

    def record_observation(self, agent_id: Hashable, observation: Any) -> None:
        """The latest observation of `agent_id` (the samplers record it)."""
        self._last_observations[agent_id] = observation

    def last_action_for(self, agent_id: Hashable = 0) -> Any:
        return self._last_actions.get(agent_id)

    def record_action(self, agent_id: Hashable, action: Any) -> None:
        """The latest action of `agent_id` (the samplers record it; `last_action_for` reads it)."""
        self._last_actions[agent_id] = action

    def record_info(self, agent_id: Hashable, info: dict) -> None:
        """The latest info of `agent_id` (the samplers record it; `last_info_for` reads it)."""
        self._last_infos[agent_id] = info

    def __repr__(self):
        return (f"Episode(id={self.episode_id}, env_index={self.env_index}, length={self.length}, "
                f"total_reward={self.total_reward:.3f})")
