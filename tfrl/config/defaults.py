"""The one source of trainer config defaults: `COMMON_CONFIG`, the keys every trainer has, and
`with_common_config`, which adds an algorithm's own keys to them (its `DEFAULT_CONFIG`).

A trainer's config is `COMMON_CONFIG` updated by its algorithm's defaults, updated by the user's
dict (`merge_config`). Library code reads keys from the merged config or from a typed settings
dataclass (settings.py) and never restates a default of its own.
"""
from __future__ import annotations

from typing import Any, Dict

from tfrl.config.merge import merge_config
from tfrl.config.model import MODEL_DEFAULTS

COMMON_CONFIG: Dict[str, Any] = {
    # === Environment ===
    "env": None,
    "env_config": {},
    "gamma": 0.99,
    "clip_rewards": None,
    "clip_actions": True,
    "normalize_actions": False,
    "observation_filter": "NoFilter",
    "seed": None,
    # === Rollouts ===
    "num_workers": 2,
    "num_envs_per_worker": 1,
    "rollout_fragment_length": 200,
    "batch_mode": "truncate_episodes",
    # classic RLlib's episode horizon (tfrl/env/horizon.py): episodes are truncated (gymnasium's
    # TimeLimit semantics, so values bootstrap) at this many steps; None: only the env ends them
    "horizon": None,
    # at the horizon, end the episode without resetting the env (the next starts where it ended)
    "soft_horizon": False,
    # report the env's terminations as truncations: no episode ends terminal
    "no_done_at_end": False,
    "num_cpus_per_worker": 1,
    "num_gpus_per_worker": 0,
    # Ray custom resources each remote rollout worker reserves, e.g. {"rollout": 1} to keep the
    # workers on nodes started with `ray start --resources='{"rollout": 8}'`
    "custom_resources_per_worker": {},
    "num_gpus": 0,
    # Ray resources the learner needs, e.g. {"GPU": 1} or {"learner": 1}. The learner runs in the
    # trainer's process: a Tune trial reserves them for it; outside Tune the trainer checks that
    # the node its driver runs on offers them (None: no requirement)
    "learner_resources": None,
    # CPUs a Tune trial reserves for the trainer itself (the learner); 0, as outside Tune, where
    # the driver process reserves nothing from Ray and only the rollout workers do
    "num_cpus_for_driver": 0,
    "check_observations": True,
    "check_actions": True,
    "explore": True,
    "callbacks": None,
    "recreate_failed_workers": True,
    # testing and benchmarking only: seconds each remote worker sleeps per gradient it computes
    # ([delay of worker 1, delay of worker 2, ...]); None: no delay
    "debug_gradient_delay_s": None,
    # merge the workers' observation-filter updates into the driver's after every iteration
    "synchronize_filters": True,
    # === Learning ===
    "train_batch_size": 200,
    "lr": 1e-4,
    "model": MODEL_DEFAULTS,
    # the policy optimizer (tfrl/optimizers/selection.py): a strategy name ("sync_samples",
    # "multi_device", "async_gradients", "sharded_ps", "allreduce", or "auto" to measure the
    # candidates and keep the fastest) among those the algorithm allows; {} (classic RLlib's
    # dict of optimizer arguments): the algorithm's own choice
    "optimizer": {},
    "num_learner_devices": "auto",
    # sharded_ps: Ray actors the flat weights are split over, each applying the optimizer step
    # to its slice
    "num_ps_shards": 2,
    # auto: the strategies it measures (None: all the algorithm allows), optimizer steps each
    # trial discards (warm-up: tracing, actor start) and then measures
    "auto_candidates": None,
    "auto_warmup_steps": 1,
    "auto_trial_steps": 2,
    "auto_abandon_ratio": 0.5,
    # === Iterations and metrics ===
    "min_iter_time_s": 0,
    "timesteps_per_iteration": 0,
    "metrics_smoothing_episodes": 100,
    # === Evaluation ===
    # every N iterations run evaluation episodes on separate workers (None: never)
    "evaluation_interval": None,
    "evaluation_num_episodes": 10,
    # overrides of this config for the evaluation workers, e.g. {"explore": False}
    "evaluation_config": {},
    # remote evaluation workers; 0 runs the episodes in a local worker of the driver
    "evaluation_num_workers": 0,
    # a function (trainer, evaluation WorkerSet) -> metrics dict that runs the evaluation instead
    # of the episodes above (classic RLlib's); the workers have the current weights and filters
    "custom_eval_function": None,
    # === Offline data (tfrl/offline/settings.py documents each key) ===
    "input": "sampler",
    "input_evaluation": [],
    "postprocess_inputs": False,
    "shuffle_buffer_size": 0,
    "input_skip_corrupt": False,
    "output": None,
    "output_format": "tfrecord",
    "output_compress_columns": ["obs", "new_obs"],
    "output_max_file_size": 64 * 1024 * 1024,
    # === Serving export ===
    # every N iterations write the policy as a SavedModel into export_dir/<iteration>/ (TF
    # Serving's versioned layout); export_dir None: <logdir>/export
    "export_every": None,
    "export_dir": None,
    # === Multi-agent ===
    # observation_fn (classic RLlib's): rewrites each multi-agent step's observation dict,
    # fn(agent_obs=..., worker=..., base_env=..., policies=..., episode=...) -> the dict the
    # policies see (e.g. an agent's observation extended by the others'); None: as the env gives
    "multiagent": {"policies": {}, "policy_mapping_fn": None, "policies_to_train": None,
                   "observation_fn": None},
    # === Infrastructure ===
    "ray_address": None,
    "replay_address": None,
    # credentials of the external replay-server at replay_address: files holding its access token
    # and the PEM certificate to trust for TLS (as its --token-file and --tls-cert)
    "replay_token_file": None,
    "replay_root_certificates": None,
    # === Replay placement on a cluster (tfrl/replay_hosting/placement.py) ===
    # Ray resources of the replay server the trainer starts, e.g. {"replay": 1}: it then runs as
    # a Ray actor on a node offering them (None: inside the driver)
    "replay_resources": None,
    # interface that server listens on: None (loopback), "node" (the routable address of the node
    # hosting it), "0.0.0.0" or an IP address; the address handed to workers and the learner is
    # the node's own. replay_token_file then makes it demand that token, and the two files below
    # make it serve TLS (clients trust replay_root_certificates, by default this certificate)
    "replay_bind_address": None,
    # seconds a replay server actor may take to start (its node found, process up, checkpoint
    # restored) before the trainer gives up on it: ReplayStartTimeoutError, or for a lost Ape-X
    # shard being restarted, going on without it
    "replay_start_timeout_s": 300.0,
    "replay_tls_certificate_file": None,
    "replay_tls_private_key_file": None,
    "replay_checkpoint": False,
    "log_level": "WARN",
    "tf_threads_per_worker": 1,
    # compile each policy's action function with XLA (one compile per batch size; with one
    # TensorFlow thread a small network's call takes about a third of the plain graph's time):
    # True everywhere, False nowhere, "auto" in the remote workers of a single-agent env, whose
    # batch size never changes
    "jit_compile_actions": "auto",
    # compile the on-policy learner's epochs of minibatch steps (PPO, A2C, PG: MinibatchSGD)
    # with XLA when it trains on one device
    "jit_compile_learner": False,
    "numpy_actions": True,
    "numpy_rollout_workers": True,
    # intra- and inter-op threads of TensorFlow in the driver (the learner); None: TF's default
    "driver_tf_threads": None,
    # === Classic RLlib keys (tfrl.config.apply_classic_keys) ===
    # "tf" / "tf2" / "tfe": all run TensorFlow 2 eagerly with traced learn and act steps; any
    # other framework is refused
    "framework": "tf2",
    # accepted for classic configs; tfrl always runs eagerly with its hot paths traced
    "eager": False,
    "eager_tracing": False,
    # accepted for classic configs (refused when True)
    "use_pytorch": False,
    # PPO's top-level spelling before Ray 1.x; when set it goes to model["vf_share_layers"]
    "vf_share_layers": None,
}


def with_common_config(extra_config: dict) -> dict:
    """An algorithm's default config: COMMON_CONFIG with the algorithm's own keys added."""
    return merge_config(COMMON_CONFIG, extra_config, allow_new_keys=True)
