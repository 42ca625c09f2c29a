"""Ape-X DQN trainer: APEX_DEFAULT_CONFIG and ApexTrainer.

Distributed prioritized experience replay (Horgan et al. 2018) as a configuration of DQN: the
same policy (DQNTFPolicy: double Q, dueling heads, n-step returns), run by the
AsyncReplayOptimizer instead of the SyncReplayOptimizer. Many rollout workers, each exploring
with its own constant epsilon, rate their own transitions (worker-side prioritization) and write
them into several replay shards; a learner thread samples from all shards, sends new priorities
back to each item's shard and publishes weights that workers take before their next sample.
The target network is refreshed by the optimizer every `target_network_update_freq` trained
rows. See tfrl/optimizers/async_replay_optimizer.py for the data path.
"""
from __future__ import annotations

import copy

from tfrl.agents.dqn.config import DEFAULT_CONFIG as DQN_CONFIG
from tfrl.agents.dqn.dqn import DQNTrainer
from tfrl.agents.dqn.dqn import validate_config as validate_dqn_config
from tfrl.errors import InvalidConfigError
from tfrl.trainer import sync_target_networks

# The keys every Ape-X trainer shares (APEX, APEX_DDPG): replay shards, replay, per-worker
# exploration, the learner's pace and the rollouts (the paper's settings).
APEX_COMMON_CONFIG = {
    # === Replay shards ===
    # Replay servers the trainer starts, each a process of its own; workers write each fragment
    # into one of them (rotating) and the learner reads from all.
    "num_replay_shards": 4,
    # Or ["host:port", ...]: external replay-servers serving a `replay` table, one per shard.
    "replay_shard_addresses": None,
    # A lost shard (its node died) is dropped: writers and the learner go on with the others.
    # With a directory here (shared storage on a cluster) the shards checkpoint into it every
    # replay_shard_checkpoint_interval_s and a lost shard is restarted, on any node with
    # replay_resources, from its latest checkpoint.
    "replay_shard_checkpoint_dir": None,
    "replay_shard_checkpoint_interval_s": 60.0,
    # How often the driver checks that every shard still answers (a loss is also noticed at
    # once when the learner or a writer fails).
    "replay_shard_check_interval_s": 10.0,
    # Transitions all shards hold together (each holds buffer_size / num_replay_shards).
    "buffer_size": 2000000,
    # Transitions all shards hold together before learning starts.
    "learning_starts": 50000,
    # None: the learner trains as fast as it can (the paper); a number: the trained / inserted
    # ratio each shard's rate limiter holds.
    "training_intensity": None,
    "prioritized_replay": True,
    # Workers compute the initial priority of their transitions from their own TD errors.
    "worker_side_prioritization": True,
    # === Exploration ===
    # Worker i of N explores with the constant worker_epsilon ** (1 + i / (N - 1) *
    # worker_epsilon_alpha) (0.4 and 7 in the paper) as its epsilon (APEX) or action-noise scale
    # (APEX_DDPG); False: exploration_config's schedule on every worker.
    "per_worker_exploration": True,
    "worker_epsilon": 0.4,
    "worker_epsilon_alpha": 7.0,
    # === Learner ===
    "n_step": 3,
    "train_batch_size": 512,
    # Gradient steps per learner call; one priority update per shard and call.
    "learner_steps_per_call": 4,
    # Gradient steps between weight publications; a worker takes the newest before sampling.
    "max_weight_sync_delay": 400,
    # === Rollouts ===
    # sample() calls each worker has outstanding (RLlib's AsyncReplayOptimizer keeps 2): a
    # worker starts its next fragment as soon as one ends, not after the driver's round trip.
    "max_sample_requests_in_flight_per_worker": 2,
    "num_workers": 32,
    "num_envs_per_worker": 1,
    "rollout_fragment_length": 50,
    "timesteps_per_iteration": 25000,
    "min_iter_time_s": 30,
}

APEX_DEFAULT_CONFIG = copy.deepcopy(DQN_CONFIG)
APEX_DEFAULT_CONFIG.update(APEX_COMMON_CONFIG)
APEX_DEFAULT_CONFIG.update({
    "lr": 1e-4,
    # Copy the online network into the target every this many *trained* rows.
    "target_network_update_freq": 500000,
})


def validate_config(config: dict) -> None:
    """DQN's checks plus Ape-X's.

    Raises:
        InvalidConfigError: anything DQN's validate_config or `check_apex_settings` refuses.
    """
    validate_dqn_config(config)
    check_apex_settings(config, "APEX")


def check_apex_settings(config: dict, name: str) -> None:
    """The settings every Ape-X trainer (`name` in messages) needs.

    Raises:
        InvalidConfigError: worker-side prioritization without prioritized replay;
            replay_address (Ape-X takes replay_shard_addresses); an empty or non-list
            replay_shard_addresses; a max_weight_sync_delay, learner_steps_per_call or
            num_replay_shards below 1.
    """
    if config["worker_side_prioritization"] and not config["prioritized_replay"]:
        raise InvalidConfigError(
            f"{name}: worker_side_prioritization needs prioritized_replay True (a uniform table "
            "ignores priorities); set one of them False.")
    for key in ("max_weight_sync_delay", "learner_steps_per_call", "num_replay_shards"):
        if int(config[key]) < 1:
            raise InvalidConfigError(f"{name}: {key} must be >= 1, got {config[key]}.")
    if config.get("replay_address"):
        raise InvalidConfigError(
            f"{name}: replay_address names one replay server; Ape-X writes into several shards. "
            "Give them as replay_shard_addresses: [\"host:port\", ...] (each serving a table "
            "`replay`), or drop it to let the trainer start num_replay_shards servers.")
    addresses = config["replay_shard_addresses"]
    if addresses is not None and (isinstance(addresses, str) or not list(addresses)):
        raise InvalidConfigError(
            f"{name}: replay_shard_addresses must be a non-empty list of host:port, got "
            f"{addresses!r}.")


def make_async_replay_optimizer(workers, config, replay):
    """AsyncReplayOptimizer: replay shards, per-worker epsilons, a learner thread."""
    from tfrl.optimizers.async_replay_optimizer import AsyncReplayOptimizer

    return AsyncReplayOptimizer(workers, config, replay)


ApexTrainer = DQNTrainer.with_updates(
    name="APEX",
    default_config=APEX_DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_async_replay_optimizer,
    after_init=sync_target_networks,
    # the optimizer refreshes the target itself (in trained rows); workers get the timestep
    # with their weights
    after_optimizer_step=None,
)
