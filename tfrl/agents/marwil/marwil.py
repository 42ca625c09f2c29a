"""MARWIL and BC trainers: learning from recorded experience (classic RLlib's MARWIL and BC).

The policy is MARWILTFPolicy (marwil_policy.py); BC is the same trainer with `beta: 0`. The
rollout workers read recorded batches from `input` (tfrl/offline/), postprocess them with
MARWIL's returns (`postprocess_inputs`) and write them into a queue table, from which the
SyncSamplesOptimizer's learner takes minibatch steps, as for PG. Evaluation workers play the
envs greedily (`evaluation_config`), so `evaluation_interval` reports the learned policy's
return. See docs/architecture.md, "Adding an algorithm".
"""
from __future__ import annotations

from tfrl.agents.marwil.config import DEFAULT_CONFIG
from tfrl.agents.marwil.marwil_policy import MARWILTFPolicy
from tfrl.config import merge_config
from tfrl.errors import InvalidConfigError
from tfrl.optimizers.train_batch import fit_fragments_to_train_batch
from tfrl.trainer_template import build_trainer


def validate_config(config: dict) -> None:
    """MARWIL settings check: beta >= 0; batch sizes as for PG when sampling the envs.

    Raises:
        InvalidConfigError: a negative beta or inconsistent batch sizes.
    """
    beta = config["beta"]
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0:
        raise InvalidConfigError(f"MARWIL: beta must be a number >= 0 (0 is BC), got {beta!r}")
    if config["input"] == "sampler":
        fit_fragments_to_train_batch(config, "MARWIL")
    elif config["sgd_minibatch_size"] is None:
        config["sgd_minibatch_size"] = config["train_batch_size"]


def make_policy_optimizer(workers, config, replay):
    """SyncSamplesOptimizer: minibatch steps on each train batch of read (or sampled) rows."""
    from tfrl.optimizers.sync_samples_optimizer import SyncSamplesOptimizer

    return SyncSamplesOptimizer(workers, config, replay)


MARWILTrainer = build_trainer(
    "MARWIL",
    default_policy=MARWILTFPolicy,
    default_config=DEFAULT_CONFIG,
    validate_config=validate_config,
    make_policy_optimizer=make_policy_optimizer,
)

BC_DEFAULT_CONFIG = merge_config(DEFAULT_CONFIG, {"beta": 0.0})

BCTrainer = MARWILTrainer.with_updates(name="BC", default_config=BC_DEFAULT_CONFIG)
