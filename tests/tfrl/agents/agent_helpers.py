"""Helpers shared by the algorithm tests: spaces, tiny configs, numpy references."""
from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import tensorflow as tf
import tree

from tfrl.policy import SampleBatch

TINY_MODEL = {"fcnet_hiddens": [8]}


def cartpole_spaces():
    env = gym.make("CartPole-v1")
    return env.observation_space, env.action_space


def trainer_config(default_config: dict, **overrides) -> dict:
    """A trainer's DEFAULT_CONFIG with a tiny model (replacing the whole model section) and
    the given overrides, as a rollout worker would pass it to the policy."""
    config = copy.deepcopy(default_config)
    config["model"] = dict(TINY_MODEL)
    config.update(overrides)
    return config


def loss_outputs(policy, batch: SampleBatch):
    """(loss, stats, per_sample) as numpy, from the policy's loss on the batch (no update)."""
    tensors = {k: tree.map_structure(lambda a, s=spec: tf.constant(a, s.dtype), batch[k])
               for k, spec in policy.loss_input_signature.items()}
    loss, stats, per_sample = policy.loss_and_stats(tensors)
    return (float(loss.numpy()), {k: float(v.numpy()) for k, v in stats.items()},
            {k: v.numpy() for k, v in per_sample.items()})


def log_softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def categorical_logp(logits, actions) -> np.ndarray:
    return log_softmax(logits)[np.arange(len(actions)), np.asarray(actions)]


def categorical_entropy(logits) -> np.ndarray:
    logp = log_softmax(logits)
    return -(np.exp(logp) * logp).sum(axis=-1)


def categorical_kl(logits_p, logits_q) -> np.ndarray:
    """KL(p || q) per row."""
    logp, logq = log_softmax(logits_p), log_softmax(logits_q)
    return (np.exp(logp) * (logp - logq)).sum(axis=-1)


def model_outputs(policy, obs) -> tuple:
    """(logits [B, n], values [B]) of the policy's model for raw observations."""
    logits, _ = policy.model({SampleBatch.OBS: tf.constant(obs, tf.float32)})
    values = policy.model.value_function() if policy.model.has_value_branch else None
    return logits.numpy().astype(np.float64), (None if values is None else
                                               values.numpy().astype(np.float64))


def stop_frees(trainer, ref) -> bool:
    """Stops `trainer` with the garbage collector off and says whether the object of the weak
    reference `ref` was freed by then (its last references dropped by stop() itself, not left
    to a later collection). Call it outside an `assert` statement: pytest's rewritten assert
    keeps the values of the expression it evaluates, the object among them."""
    import gc

    gc.collect()
    gc.disable()
    try:
        trainer.stop()
        return ref() is None
    finally:
        gc.enable()
