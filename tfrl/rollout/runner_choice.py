"""Which env runner samples a rollout worker's envs, chosen by the kind of env its creator made.

Called by RolloutWorker (rollout_worker.py) when it is built and when a policy is swapped:

- an ExternalEnv: ExternalEnvRunner (external_sampler.py), or for an ExternalMultiAgentEnv
  ExternalMultiAgentEnvRunner (external_multi_agent_sampler.py); once per worker;
- classic RLlib's BaseEnv: BaseEnvRunner (base_env_sampler.py), polling it;
- classic RLlib's VectorEnv: VectorEnvRunner (vector_env_sampler.py), one `vector_step` a step;
- MultiAgentEnvs: MultiAgentEnvRunner (multi_agent_sampler.py);
- gymnasium envs: EnvRunner (sampler.py).

A runner that replaces one of its own kind (a policy swap) adopts the running episodes of the
external and polled envs, whose episodes the runner cannot restart.
"""
from __future__ import annotations

from tfrl import errors
from tfrl.env.base_env import BaseEnv
from tfrl.env.external_env import ExternalEnv
from tfrl.env.vector_env import VectorEnv
from tfrl.rollout.action_adapter import ActionAdapter


def make_runner(worker, env_seeds: list):
    """The env runner of `worker` (a RolloutWorker whose envs, policies and filters are built);
    `env_seeds` are its envs' seeds for their first resets (None each: unseeded).

    Raises:
      InvalidConfigError: an ExternalEnv with num_envs_per_worker other than 1.
    """
    settings = worker.settings
    adapters = {pid: ActionAdapter(p.action_space, worker.env_name,
                                   clip_actions=settings.clip_actions,
                                   normalize_actions=settings.normalize_actions,
                                   check=settings.check_actions)
                for pid, p in worker.policy_map.items()}
    observation_fn = (settings.multiagent or {}).get("observation_fn")
    env = worker.env
    if isinstance(env, ExternalEnv):
        runner = _external_runner(worker, adapters, observation_fn)
    elif isinstance(env, BaseEnv):
        from tfrl.rollout.base_env_sampler import BaseEnvRunner

        runner = BaseEnvRunner(worker, env, worker.env_name, worker.policy_map,
                               worker.policy_mapping_fn, worker.filters, worker.callbacks,
                               settings, adapters, observation_fn=observation_fn,
                               multi_agent=worker.multi_agent)
    elif worker.multi_agent:
        from tfrl.rollout.multi_agent_sampler import MultiAgentEnvRunner

        return MultiAgentEnvRunner(worker, worker.envs, worker.env_name, worker.policy_map,
                                   worker.policy_mapping_fn, worker.filters, worker.callbacks,
                                   env_seeds, settings, adapters, observation_fn=observation_fn)
    else:
        pid = next(iter(worker.policy_map))
        if isinstance(env, VectorEnv):
            from tfrl.rollout.vector_env_sampler import VectorEnvRunner

            return VectorEnvRunner(worker, env, worker.env_name, worker.policy_map[pid], pid,
                                   worker.filters[pid], worker.callbacks, settings, adapters[pid])
        from tfrl.rollout.sampler import EnvRunner

        return EnvRunner(worker, worker.envs, worker.env_name, worker.policy_map[pid], pid,
                         worker.filters[pid], worker.callbacks, env_seeds, settings, adapters[pid])
    old = getattr(worker, "runner", None)
    if isinstance(old, type(runner)):  # running episodes go on under the new policy
        runner.adopt(old)
    return runner


def _external_runner(worker, adapters, observation_fn):
    settings = worker.settings
    if len(worker.envs) != 1:
        raise errors.InvalidConfigError(
            f"env {worker.env_name!r} is an ExternalEnv, which a worker hosts once; set "
            f"num_envs_per_worker to 1 (got {len(worker.envs)})")
    if worker.multi_agent:
        from tfrl.rollout.external_multi_agent_sampler import ExternalMultiAgentEnvRunner

        return ExternalMultiAgentEnvRunner(
            worker, worker.env, worker.env_name, worker.policy_map, worker.policy_mapping_fn,
            worker.filters, worker.callbacks, settings, adapters, observation_fn=observation_fn)
    from tfrl.rollout.external_sampler import ExternalEnvRunner

    pid = next(iter(worker.policy_map))
    return ExternalEnvRunner(worker, worker.env, worker.env_name, worker.policy_map[pid], pid,
                             worker.filters[pid], worker.callbacks, settings, adapters[pid])
