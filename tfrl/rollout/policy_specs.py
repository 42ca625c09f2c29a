"""Policy specs resolved into a rollout worker's policy map (RLlib classic's `policies` dict).

A RolloutWorker (rollout_worker.py) is given a policy class or a dict policy_id ->
(policy_class, observation_space, action_space, config), possibly only through
config["multiagent"]["policies"]. `build_policy_map` turns that into the worker's policy map: a
None class takes the trainer's default policy class, a None space the env's (a multi-agent env's
spaces of an agent mapped to the policy, else its shared observation_space/action_space), and
each policy's config is the worker's config with the spec's config over it and the worker's
seed. It also settles the agent -> policy mapping function (the only policy when there is one).
A hand-written policy class (one that does not preprocess observations itself) on a Discrete,
Dict or Tuple space is built with classic RLlib's flat preprocessed space instead
(classic_preprocessing.py).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from tfrl import errors
from tfrl.rollout.classic_preprocessing import needs_classic_preprocessing

DEFAULT_POLICY_ID = "default_policy"


def build_policy_map(policy_spec: Any, *, env: Any, env_name: str, multi_agent: bool,
                     config: dict, multiagent: dict, worker_seed: Optional[int],
                     policy_mapping_fn: Optional[Callable[[Any], str]],
                     default_policy_class: Any) -> Tuple[Dict[str, Any], Callable[[Any], str]]:
    """The policies of a worker and its agent -> policy id function.

    Args:
      policy_spec: a policy class, or a dict policy_id -> (policy_class, observation_space,
        action_space, config) (an empty dict takes multiagent["policies"]).
      env, env_name, multi_agent: the worker's first env, its name, whether it is a
        MultiAgentEnv.
      config: the worker's config, each policy's config under the spec's own.
      multiagent: the worker's multiagent settings (policies, policy_mapping_fn).
      worker_seed: the worker's seed, given to every policy (None: unseeded).
      policy_mapping_fn: agent_id -> policy_id; None takes multiagent's, else the only policy.
      default_policy_class: the class for specs that give None.

    Returns:
      ({policy_id: policy}, policy_mapping_fn).

    Raises:
      InvalidConfigError: no policies, several without a mapping function, a malformed spec, a
        spec without a class and no default one, or a None space that the env does not give.
      UnsupportedSpaceError: a declared space differs from the env's agents' spaces, or the
        policy cannot handle its spaces.
    """
    specs = policy_specs_by_id(policy_spec, multiagent)
    if not specs:
        raise errors.InvalidConfigError(
            f"env {env_name!r}: no policies given; pass a policy class or a dict "
            "policy_id -> (policy_class, observation_space, action_space, config)")
    mapping_fn = policy_mapping_fn or multiagent.get("policy_mapping_fn")
    if mapping_fn is None:
        if len(specs) > 1:
            raise errors.InvalidConfigError(
                f"env {env_name!r}: {len(specs)} policies but no policy_mapping_fn; set "
                "config['multiagent']['policy_mapping_fn'] (agent_id -> policy_id)")
        only = next(iter(specs))
        mapping_fn = lambda agent_id: only  # noqa: E731
    policy_map: Dict[str, Any] = {}
    for pid, spec in specs.items():
        policy_cls, obs_space, act_space, policy_config = unpack_policy_spec(pid, spec,
                                                                             default_policy_class)
        env_obs, env_act, of_its_agents = _env_spaces_for(pid, env, multi_agent, mapping_fn)
        for what, declared, actual in (("observation", obs_space, env_obs),
                                       ("action", act_space, env_act)):
            # a shared space of a classic multi-agent env only stands in for a spec's None
            if of_its_agents and declared is not None and actual is not None \
                    and declared != actual:
                raise errors.UnsupportedSpaceError(
                    f"env {env_name!r}: policy {pid!r} declares the {what} space "
                    f"{declared}, but the env's agents mapped to it have {actual}; make the "
                    "policy spec match the env")
        obs_space = obs_space if obs_space is not None else env_obs
        act_space = act_space if act_space is not None else env_act
        missing = [what for what, space in (("observation", obs_space), ("action", act_space))
                   if space is None]
        if missing:
            kinds = " and ".join(missing)
            raise errors.InvalidConfigError(
                f"env {env_name!r}: the {kinds} space of policy {pid!r} is unknown: its "
                f"spec gives None, no agent in the env's {'/'.join(m + '_spaces' for m in missing)} "
                f"maps to it, and the env has no shared {'/'.join(m + '_space' for m in missing)}; "
                "give it in the policy spec (policy_class, observation_space, action_space, "
                "config)")
        merged = dict(config)
        merged.update(policy_config or {})
        merged.pop("callbacks", None)
        merged.pop("multiagent", None)
        if worker_seed is not None:
            merged["seed"] = worker_seed  # distinct action-sampling seeds per worker
        try:
            if needs_classic_preprocessing(policy_cls, obs_space, merged):
                # imported here: it imports TensorFlow, which numpy stand-ins' workers never load
                from tfrl.models.preprocessors import classic_observation_space

                # a hand-written policy, or a TF policy with a classic custom model
                obs_space = classic_observation_space(obs_space)
            policy_map[pid] = policy_cls(obs_space, act_space, merged)
        except errors.UnsupportedSpaceError as exc:
            raise errors.UnsupportedSpaceError(
                f"env {env_name!r}: policy {pid!r} ({getattr(policy_cls, '__name__', policy_cls)}) "
                f"cannot handle observation space {obs_space} / action space {act_space}: "
                f"{exc}") from exc
    return policy_map, mapping_fn


def policy_specs_by_id(policy_spec: Any, multiagent: dict) -> Dict[str, Any]:
    """policy_id -> spec as given: a policy class alone is the default policy's, and an empty
    dict takes multiagent["policies"]."""
    if isinstance(policy_spec, dict) and not policy_spec and multiagent.get("policies"):
        policy_spec = multiagent["policies"]
    if isinstance(policy_spec, dict):
        return dict(policy_spec)
    return {DEFAULT_POLICY_ID: (policy_spec, None, None, {})}


def unpack_policy_spec(pid: str, spec: Any, default_policy_class: Any) -> Tuple[Any, Any, Any, Any]:
    """(policy_class, observation_space, action_space, config) of one policy's spec, a class alone
    or that tuple; a None class is `default_policy_class`.

    Raises:
      InvalidConfigError: a malformed spec, or no class and no default one.
    """
    if isinstance(spec, type) or callable(spec) and not isinstance(spec, (tuple, list)):
        return spec, None, None, {}
    if not isinstance(spec, (tuple, list)) or len(spec) != 4:
        raise errors.InvalidConfigError(
            f"policy spec of {pid!r} must be (policy_class, observation_space, action_space, "
            f"config), got {spec!r}")
    policy_cls, obs_space, act_space, policy_config = spec
    policy_cls = policy_cls or default_policy_class
    if policy_cls is None:
        raise errors.InvalidConfigError(
            f"policy spec of {pid!r} has no policy class and there is no default one")
    return policy_cls, obs_space, act_space, policy_config


def _env_spaces_for(pid: str, env: Any, multi_agent: bool, policy_mapping_fn: Callable[[Any], str]):
    """(observation space, action space, whether they are the spaces of the agents mapped
    to `pid`) the env declares for policy `pid`: a multi-agent env's per-agent spaces of
    an agent mapped to it, else its shared spaces (classic RLlib's MultiAgentEnv), else
    None."""
    if not multi_agent:
        return env.observation_space, env.action_space, True
    for agent_id in getattr(env, "observation_spaces", None) or {}:
        if policy_mapping_fn(agent_id) == pid:
            return (env.get_observation_space(agent_id),
                    env.get_action_space(agent_id), True)
    return (getattr(env, "observation_space", None),
            getattr(env, "action_space", None), False)
