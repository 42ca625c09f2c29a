"""A TFPolicy's loss initialisation: which batch columns its loss reads, found by running it.

Part of the policy layer (tfrl/policy/tf_policy.py, step 6 of its construction): a dummy batch
of zeros is made by acting on zero observations, postprocessed, and the loss, stats and
extra-learn fetches run once eagerly on it through a dict that records the keys they read (as
classic RLlib's placeholder tracking); those columns become the learn step's input signature,
the variables get created, and the optimizer's slots are built so that no traced step creates
variables (required under tf.distribute.MirroredStrategy).
"""
from __future__ import annotations

import contextlib
from typing import Dict

import numpy as np
import tensorflow as tf
import tree

from tfrl.errors import InvalidBatchError
from tfrl.policy.rnn_sequencing import pad_batch_to_sequences
from tfrl.policy.sample_batch import SampleBatch


class _TrackingDict(dict):
    """Records which keys are read, to find the columns a loss needs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.accessed = set()

    def __getitem__(self, key):
        self.accessed.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self:
            self.accessed.add(key)
        return super().get(key, default)

def spec_of(array) -> tf.TensorSpec:
    dtype = np.asarray(array).dtype
    if dtype.hasobject:
        raise InvalidBatchError("A loss read a column of Python objects (e.g. infos); losses "
                                "can only read numeric columns.")
    if np.issubdtype(dtype, np.floating):
        dtype = np.float32
    return tf.TensorSpec([None, *np.shape(array)[1:]], tf.as_dtype(dtype))

def is_object_column(value) -> bool:
    return any(isinstance(a, np.ndarray) and a.dtype.hasobject for a in tree.flatten(value))


class LossInitialization:
    """Builds a TFPolicy's learn signature and learn functions from a dummy batch (a base of
    `TFPolicy`, on whose hooks and traced building blocks it works)."""

    def loss_initialized(self) -> bool:
        """Whether the loss is built: False while construction postprocesses its dummy batch
        (classic RLlib's check in postprocessors that call the model), True after."""
        return getattr(self, "_loss_ready", False)

    @contextlib.contextmanager
    def postprocessing_a_dummy_batch(self):
        """While a made-up batch is postprocessed (a replay signature's dummy trajectory,
        tfrl/rollout/replay_output.py): `loss_initialized()` says False, as for construction's
        dummy batch, which classic postprocessing functions check before they read what only
        real trajectories have (other agents' batches)."""
        ready, self._loss_ready = self.loss_initialized(), False
        try:
            yield
        finally:
            self._loss_ready = ready

    def _dummy_batch(self, size: int = 4) -> SampleBatch:
        obs = self.preprocessor.zeros(size)
        states = [np.zeros((size, *s.shape[1:]), s.dtype.as_numpy_dtype)
                  for s in self._state_specs]
        actions, state_out, extras = self._compute_actions_eager(obs, states)
        batch = {
            SampleBatch.OBS: obs,
            SampleBatch.NEXT_OBS: self.preprocessor.zeros(size),
            SampleBatch.ACTIONS: actions,
            SampleBatch.PREV_ACTIONS: tree.map_structure(np.zeros_like, actions),
            SampleBatch.REWARDS: np.zeros(size, np.float32),
            SampleBatch.PREV_REWARDS: np.zeros(size, np.float32),
            SampleBatch.TERMINATEDS: np.zeros(size, bool),
            SampleBatch.TRUNCATEDS: np.zeros(size, bool),
            SampleBatch.EPS_ID: np.zeros(size, np.int64),
            SampleBatch.UNROLL_ID: np.zeros(size, np.int64),
            SampleBatch.AGENT_INDEX: np.zeros(size, np.int64),
            SampleBatch.T: np.arange(size, dtype=np.int64),
            SampleBatch.PRIO_WEIGHTS: np.ones(size, np.float32),
        }
        for i, s in enumerate(states):
            batch[SampleBatch.state_in(i)] = s
            batch[SampleBatch.state_out(i)] = state_out[i]
        batch.update(extras)
        return SampleBatch(batch)

    def _initialize_loss(self) -> None:
        self._learn_signature: Dict = {}
        self._build_action_functions()
        dummy = self.postprocess_trajectory(self._dummy_batch())
        if self.is_recurrent():
            dummy = pad_batch_to_sequences(dummy, self.config["model"]["max_seq_len"])
        tensors = {k: tree.map_structure(
            lambda a: tf.constant(np.asarray(a, spec_of(a).dtype.as_numpy_dtype)), v)
            for k, v in dummy.items() if not is_object_column(v)}
        tracking = _TrackingDict(tensors)
        self._run_loss(tracking)
        keys = set(tracking.accessed)
        if self.is_recurrent():
            keys |= {SampleBatch.SEQ_LENS} | {SampleBatch.state_in(i)
                                              for i in range(len(self._state_specs))}
        self._learn_signature = {k: tree.map_structure(spec_of, dummy[k]) for k in sorted(keys)}
        self.optimizer.build(self.model.trainable_variables)
        self._build_learn_functions()
