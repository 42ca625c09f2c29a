"""tfrl: a TensorFlow 2 reinforcement-learning toolkit.

Policies (`tfrl.policy`, built with `build_tf_policy`) and models (`tfrl.models`) hold the
numerics; rollout workers on Ray (`tfrl.rollout`) produce experience into a replay service
(the `replay` package); policy optimizers (`tfrl.optimizers`) own the distributed execution;
trainers (`tfrl.trainer`, `build_trainer`, `tfrl.agents`) drive it all.
"""
import importlib
import os
from typing import Any

# tfrl's models are Keras 2 (tf_keras), and so is the code of the users it serves (classic
# RLlib's `tf.keras`, TF-Agents, Reverb's users on TensorFlow 2.15): set before TensorFlow is
# imported, TensorFlow's documented switch makes its `tf.keras` tf_keras and leaves Keras 3
# unimported (2-3 s less start-up per process). A user's own setting, or TensorFlow imported
# first, wins.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from tfrl import errors

# Exported names -> the module defining them. Imported on first use (PEP 562), so `tfrl` and
# the `tfrl` command start without TensorFlow: the command quiets TensorFlow's start-up
# messages before anything imports it.
_EXPORTS = {
    "ModelCatalog": "tfrl.models", "TFModel": "tfrl.models",
    **{name: "tfrl.policy" for name in (
        "DEFAULT_POLICY_ID", "ComputeTDErrorMixin", "EntropyCoeffSchedule", "KLCoeffMixin",
        "LearningRateSchedule", "MultiAgentBatch", "Policy", "SampleBatch", "TargetNetworkMixin",
        "TFPolicy", "ValueNetworkMixin", "adjust_nstep", "build_tf_policy", "compute_advantages",
        "compute_gae_for_sample_batch", "concat_samples")},
    "LinearSchedule": "tfrl.utils", "PiecewiseSchedule": "tfrl.utils",
    "MultiAgentEnv": "tfrl.env", "register_env": "tfrl.env",
    **{name: "tfrl.rollout" for name in (
        "DefaultCallbacks", "ReplayOutputSpec", "RolloutWorker", "WorkerSet", "collect_episodes",
        "replay_signature", "summarize_episodes")},
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        try:
            value = importlib.import_module(f"tfrl.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"tfrl.{name}":
                raise
            raise AttributeError(f"module 'tfrl' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "errors", "ModelCatalog", "TFModel", "DEFAULT_POLICY_ID", "ComputeTDErrorMixin",
    "EntropyCoeffSchedule", "KLCoeffMixin", "LearningRateSchedule", "MultiAgentBatch", "Policy",
    "SampleBatch", "TargetNetworkMixin", "TFPolicy", "ValueNetworkMixin", "adjust_nstep",
    "build_tf_policy", "compute_advantages", "compute_gae_for_sample_batch", "concat_samples",
    "LinearSchedule", "PiecewiseSchedule", "MultiAgentEnv", "register_env", "DefaultCallbacks",
    "ReplayOutputSpec", "RolloutWorker", "WorkerSet", "collect_episodes", "replay_signature",
    "summarize_episodes",
]
