"""WorkerSettings: the config keys a rollout worker, its env runner and a WorkerSet read.

Built once per worker (and once per WorkerSet) with `WorkerSettings.from_config(config)`; see
tfrl/config/settings.py for how values are read and checked. The worker's whole config is still the
config of its policies (they read their own keys, e.g. gamma, lr).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Literal, Optional, Union

from tfrl.config.settings import Settings, setting


@dataclasses.dataclass(frozen=True)
class WorkerSettings(Settings):
    """What a rollout worker does with its envs (module docstring)."""

    num_envs_per_worker: int = setting("envs each worker steps together", minimum=1)
    rollout_fragment_length: int = setting(
        "env steps per env in one sample() (truncate_episodes), or at least this many rows in "
        "whole episodes (complete_episodes)", minimum=1)
    batch_mode: Literal["truncate_episodes", "complete_episodes"] = setting(
        "'truncate_episodes': cut episodes at fragment ends; 'complete_episodes': whole "
        "episodes only")
    horizon: Optional[int] = setting(
        "truncate episodes at this many steps (classic RLlib's horizon; gymnasium's TimeLimit "
        "semantics); None: only the env ends them", minimum=1)
    soft_horizon: bool = setting(
        "at the horizon, end the episode without resetting the env (needs horizon)")
    no_done_at_end: bool = setting(
        "report the env's terminations as truncations (values bootstrap at every episode end)")
    observation_filter: Optional[Literal["NoFilter", "MeanStdFilter"]] = setting(
        "observation filter of each policy: 'NoFilter' or 'MeanStdFilter'")
    clip_rewards: Union[None, bool, float] = setting(
        "training rewards: None/False as they are, True their sign, a number c clipped to "
        "[-c, c]")
    clip_actions: bool = setting("clip Box actions to the space's bounds before the env sees them")
    normalize_actions: bool = setting(
        "map Box actions from [-1, 1] onto the space's bounds before the env sees them")
    seed: Optional[int] = setting(
        "base seed (worker seed = seed + worker_index; env j reset with worker seed + "
        "10000 * j); None: unseeded")
    callbacks: Any = setting(
        "None, a DefaultCallbacks subclass, an instance of one, or a list of them")
    env_config: Optional[dict] = setting(
        "options passed to the env creator (as an EnvContext); None: no options")
    explore: bool = setting("sample with the policy's exploration (False: act greedily)")
    check_observations: bool = setting("refuse non-finite observations with a named error")
    check_actions: bool = setting("refuse actions outside the action space with a named error")
    tf_threads_per_worker: Optional[int] = setting(
        "TensorFlow intra- and inter-op threads of a remote worker's process (None or 0: "
        "TensorFlow's default)", minimum=0)
    jit_compile_actions: Union[bool, Literal["auto"]] = setting(
        "compile the policies' action functions with XLA: True, False, or 'auto' (remote "
        "workers of a single-agent env)")
    numpy_actions: bool = setting(
        "single-agent envs: draw actions with the policy's numpy copy where it has one (fully "
        "connected, categorical or Gaussian, no recurrent state); the rows' values and "
        "likelihoods come from the TensorFlow policy once per fragment")
    numpy_rollout_workers: bool = setting(
        "with numpy_actions: remote workers of a policy a numpy copy reproduces get a "
        "NumpyPolicy (tfrl/policy/numpy_policy.py) and start TensorFlow only if asked for more "
        "than sampling")
    multiagent: Optional[dict] = setting(
        "{policies, policy_mapping_fn, policies_to_train, observation_fn}; None or keys it lacks "
        "mean: policies from the policy spec, the only policy for every agent, train all, the "
        "env's observations")
    num_cpus_per_worker: float = setting("CPUs Ray reserves for each remote worker", minimum=0)
    num_gpus_per_worker: float = setting("GPUs Ray reserves for each remote worker", minimum=0)
    custom_resources_per_worker: Optional[dict] = setting(
        "Ray custom resources each remote worker reserves, e.g. {'rollout': 1} (None or {}: none)")
    recreate_failed_workers: bool = setting(
        "replace a remote worker that died or whose env crashed (False: drop it)")
    debug_gradient_delay_s: Optional[list] = setting(
        "testing only: [seconds worker 1 sleeps per gradient, worker 2, ...]; None: no delay")

    def gradient_delay(self, worker_index: int) -> float:
        """Seconds remote worker `worker_index` sleeps per gradient (debug_gradient_delay_s)."""
        delays = self.debug_gradient_delay_s or []
        return float(delays[worker_index - 1]) if 0 < worker_index <= len(delays) else 0.0

    @property
    def complete_episodes(self) -> bool:
        """True in batch_mode 'complete_episodes'."""
        return self.batch_mode == "complete_episodes"
