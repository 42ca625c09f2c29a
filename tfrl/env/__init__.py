"""Environments for tfrl: the env creator registry, the multi-agent env interface, external envs
(an application that owns the loop and asks for actions), env checks.

Rollout workers (tfrl/rollout) build their environments through this package.
"""
from tfrl.env.checks import check_actions_in_space, check_env, check_observations_finite
from tfrl.env.external_env import ExternalEnv
from tfrl.env.external_multi_agent_env import ExternalMultiAgentEnv
from tfrl.env.multi_agent_env import ALL_AGENTS, MultiAgentEnv, make_multi_agent
from tfrl.env.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv
from tfrl.env.registry import (EnvContext, ResolvedEnvCreator, register_env, registered_envs,
                               resolve_env_creator)

__all__ = [
    "ALL_AGENTS", "EnvContext", "ExternalEnv", "ExternalMultiAgentEnv", "MultiAgentEnv",
    "ResolvedEnvCreator",
    "check_actions_in_space", "check_env",
    "check_observations_finite", "make_multi_agent", "ParallelPettingZooEnv", "PettingZooEnv",
    "register_env",
    "registered_envs",
    "resolve_env_creator",
]
