"""PG trainer: DEFAULT_CONFIG and PGTrainer (vanilla policy gradient, synchronous sampling).

This is an algorithm's trainer declaration: the policy is PGTFPolicy
(pg_policy.py); the policy optimizer is SyncSamplesOptimizer (workers write postprocessed
fragments into a queue table, the learner takes one step on each train batch).
`fit_fragments_to_train_batch` is shared with the other on-policy trainers (A2C, PPO).
See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.pg.config import DEFAULT_CONFIG
from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.optimizers.train_batch import fit_fragments_to_train_batch
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """PG settings check; see optimizers.train_batch.fit_fragments_to_train_batch.

    Raises:
        InvalidConfigError: on inconsistent batch sizes.
    """
    fit_fragments_to_train_batch(config, "PG")


def make_policy_optimizer(workers, config, replay):
    """SyncSamplesOptimizer (one learn step on each train batch of synchronous samples), or the
    strategy `optimizer` names: multi_device, sharded_ps, allreduce or auto
    (tfrl/optimizers/selection.py)."""
    from tfrl.optimizers.selection import choose_policy_optimizer

    return choose_policy_optimizer(
        workers, config, replay,
        allowed=("sync_samples", "multi_device", "sharded_ps", "allreduce"),
        default="sync_samples", algorithm="PG",
        auto_candidates=("sync_samples", "sharded_ps", "allreduce"))


PGTrainer = build_trainer(
    "PG",
    default_policy=PGTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)
