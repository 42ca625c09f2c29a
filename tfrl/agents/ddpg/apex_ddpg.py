"""Ape-X DDPG trainer: APEX_DDPG_DEFAULT_CONFIG and ApexDDPGTrainer (registered as "APEX_DDPG").

Distributed prioritized experience replay (Horgan et al. 2018) with DDPG's deterministic actor
and critic: the DDPG trainer with the AsyncReplayOptimizer of Ape-X DQN instead of the
SyncReplayOptimizer (RLlib's `DDPGTrainer.with_updates(default_config=APEX_DDPG config,
make_policy_optimizer=...)`). Many rollout workers, each exploring with its own constant action
noise scale (0.4 ** (1 + i / (N - 1) * 7) of the Ornstein-Uhlenbeck noise, the per-worker
epsilons of Ape-X DQN), rate their own n-step transitions from their copy of the critic and its
target (worker-side prioritization) and write them into several replay shards; a learner thread
samples from all shards, sends |TD error| + eps back to each item's shard and publishes weights
that workers take before their next sample. The target networks follow the online ones by
polyak `tau` in every learner step, as in DDPG; the optimizer also publishes them to the workers
every `target_network_update_freq` trained rows. See tfrl/optimizers/async_replay_optimizer.py.
"""
from __future__ import annotations

from tfrl.agents.ddpg.config import DEFAULT_CONFIG as DDPG_CONFIG
from tfrl.agents.ddpg.ddpg import DDPGTrainer
from tfrl.agents.ddpg.ddpg import validate_config as validate_ddpg_config
from tfrl.agents.ddpg.ddpg_policy import DDPGTFPolicy
from tfrl.agents.dqn.apex import (APEX_COMMON_CONFIG, check_apex_settings,
                                  make_async_replay_optimizer)
from tfrl.agents.dqn.dqn_policy import add_worker_priorities
from tfrl.config import merge_config

APEX_DDPG_DEFAULT_CONFIG = merge_config(merge_config(DDPG_CONFIG, APEX_COMMON_CONFIG,
                                                     allow_new_keys=True), {
    # (the rest: APEX_COMMON_CONFIG)
    # Trained rows between publications of the target networks to the workers (their
    # priorities use them); the learner's targets move by polyak tau every step.
    "target_network_update_freq": 500000,
}, allow_new_keys=True)


def validate_config(config: dict) -> None:
    """DDPG's checks plus Ape-X's.

    Raises:
        InvalidConfigError: anything DDPG's validate_config or
            `tfrl.agents.dqn.apex.check_apex_settings` refuses.
    """
    validate_ddpg_config(config)
    check_apex_settings(config, "APEX_DDPG")


# DDPG's policy, rating its own transitions on the workers (the `priorities` column)
ApexDDPGTFPolicy = DDPGTFPolicy.with_updates(
    name="ApexDDPGTFPolicy", postprocess_fragment_fn=add_worker_priorities)

ApexDDPGTrainer = DDPGTrainer.with_updates(
    name="APEX_DDPG",
    default_config=APEX_DDPG_DEFAULT_CONFIG,
    default_policy=ApexDDPGTFPolicy,
    validate_config=validate_config,
    make_policy_optimizer=make_async_replay_optimizer,
)
