"""The inputs of a TFPolicy's traced calls as flat lists of tensors.

Part of the policy layer (tfrl/policy/tf_policy.py): acting, value estimation and the learn step
are called through `FlatCall`, which hands a concrete function a flat list of tensors in its
input signature's order and so skips tf.function's per-call argument binding (most of the cost
of a call for a small model). `TFPolicyInputs`, a base of `TFPolicy`, turns observation, state
and train batches into those lists, checking each array's shape against the signature first
(`check_shape`), since nothing is checked or converted once a flat call is made.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf
import tree

from tfrl.errors import InvalidBatchError
from tfrl.policy.rnn_sequencing import pad_batch_to_sequences
from tfrl.policy.sample_batch import SampleBatch
from tfrl.utils.rows import zero_rows


class FlatCall:
    """Calls a tf.function that has a full input_signature with a flat list of tensors.

    The function has exactly one concrete function; it is fetched (traced) on the first call
    and then called directly, in the order `tf.nest.flatten` gives the signature's leaves. The
    caller must pass tensors of the signature's dtypes and compatible shapes: unlike a
    tf.function call, nothing is checked or converted here.
    """

    def __init__(self, function):
        self.function = function
        self._concrete = None
        self._call = None

    def __call__(self, flat_inputs: list):
        if self._call is None:
            self._concrete = self.function.get_concrete_function()
            # `_call_flat` is the entry tf.function itself uses after binding arguments; it is
            # private, so fall back to the public (slower, binding) call if it ever goes away.
            self._call = getattr(self._concrete, "_call_flat", None) or (
                lambda flat, _captures: self._concrete(*flat))
        return self._call(flat_inputs, self._concrete.captured_inputs)

def shape_template(spec: tf.TensorSpec):
    return tuple(spec.shape.as_list()) if spec.shape.rank is not None else None

def check_shape(array, template, what: str) -> None:
    shape = np.shape(array)
    if template is None:
        return
    if len(shape) != len(template) or any(
            t is not None and t != d for t, d in zip(template, shape)):
        raise InvalidBatchError(
            f"{what} has shape {shape} but this policy expects {template} (None = any size); "
            "pass a batch of observations (or states) of the policy's spaces.")


def checked_tensors(arrays, leaves) -> List[tf.Tensor]:
    """`arrays` as tensors of their leaves' (dtype, shape template, what it is) triples, each
    shape checked.

    Raises:
        InvalidBatchError: an array of the wrong rank or non-batch dimension (its leaf's `what`
            names it).
    """
    tensors = []
    for array, (dtype, template, what) in zip(arrays, leaves):
        array = np.asarray(array, dtype)
        check_shape(array, template, what)
        tensors.append(tf.constant(array))
    return tensors


class TFPolicyInputs:
    """Observation, state and train batches as the flat tensor lists of a TFPolicy's traced
    calls (a base of `TFPolicy`, working on the signatures its construction sets up:
    `_obs_spec`, `_obs_leaves`, `_state_specs`, `_state_leaves`, `_prev_specs`,
    `_learn_signature`, `_learn_leaves`)."""

    def _convert_obs(self, obs_batch):
        if isinstance(obs_batch, list) and obs_batch and not isinstance(obs_batch[0], (
                int, float, np.number)) and tree.is_nested(self._obs_spec):
            obs_batch = tree.map_structure(lambda *xs: np.stack(xs), *obs_batch)
        return tree.map_structure_up_to(
            self._obs_spec, lambda spec, x: np.asarray(x, spec.dtype.as_numpy_dtype),
            self._obs_spec, obs_batch)

    def _obs_tensors(self, obs_batch) -> List[tf.Tensor]:
        """The observation batch as tensors, flat in the input signature's order.

        Raises:
            InvalidBatchError: if a leaf has the wrong rank or a wrong non-batch dimension.
        """
        if self._obs_is_nested or not isinstance(obs_batch, np.ndarray):
            leaves = tf.nest.flatten(self._convert_obs(obs_batch))
        else:
            leaves = [obs_batch]  # the common case: one array, skip the nest walk
        return checked_tensors(leaves, self._obs_leaves)

    def _state_tensors(self, state_batches, batch_size: int) -> List[tf.Tensor]:
        """Recurrent state inputs as tensors (initial states when none are given).

        Raises:
            InvalidBatchError: if a state has the wrong shape.
        """
        if not self._state_specs:
            return []
        if not state_batches:
            return [tf.constant(np.repeat(s[None], batch_size, axis=0))
                    for s in self.get_initial_state()]
        return checked_tensors(state_batches, self._state_leaves)

    def _prev_tensors(self, prev_action_batch, prev_reward_batch, batch_size: int
                      ) -> List[tf.Tensor]:
        """The previous actions and rewards as tensors, flat in the signature's order: none for
        a model that does not read them (`_prev_specs` empty), zeros where not given.

        Raises:
            InvalidBatchError: if a batch has the wrong shape.
        """
        if not self._prev_specs:
            return []
        action_spec = self._prev_specs[0]
        if prev_action_batch is None:
            actions = zero_rows(self.action_space, batch_size)  # the dtypes of `action_spec`
        else:
            if isinstance(prev_action_batch, list) and tree.is_nested(action_spec):
                prev_action_batch = tree.map_structure(lambda *xs: np.stack(xs),
                                                       *prev_action_batch)
            actions = tree.map_structure_up_to(action_spec, lambda _, a: a, action_spec,
                                               prev_action_batch)
        rewards = (np.zeros(batch_size, np.float32) if prev_reward_batch is None
                   else prev_reward_batch)
        leaves = [(spec.dtype.as_numpy_dtype, shape_template(spec), "The previous action batch")
                  for spec in tf.nest.flatten(action_spec)]
        leaves.append((np.float32, (None,), "The previous reward batch"))
        return checked_tensors(tf.nest.flatten(actions) + [rewards], leaves)

    def _prepare_batch(self, samples: SampleBatch) -> Dict:
        """{column: numpy arrays of the signature's dtypes} for the columns the loss reads.

        Raises:
            InvalidBatchError: if a column is missing.
        """
        samples = self._loss_columns(samples)
        return {k: tree.map_structure_up_to(
            spec, lambda s, a: np.asarray(a, s.dtype.as_numpy_dtype), spec, samples[k])
            for k, spec in self._learn_signature.items()}

    def _loss_columns(self, samples) -> SampleBatch:
        if not isinstance(samples, SampleBatch):
            samples = SampleBatch(samples)
        samples = samples.copy(shallow=True).decompress_if_needed()
        if self.is_recurrent() and SampleBatch.SEQ_LENS not in samples:
            samples = pad_batch_to_sequences(samples, self.config["model"]["max_seq_len"])
        missing = [k for k in self._learn_signature if k not in samples]
        if missing:
            raise InvalidBatchError(
                f"The batch lacks column(s) {missing} that this policy's loss reads; run "
                "postprocess_trajectory on rollouts first (it has "
                f"{sorted(samples.keys())}).")
        return samples

    def _learn_tensors(self, samples) -> List[tf.Tensor]:
        """The columns the loss reads as tensors, flat in the learn signature's order.

        Raises:
            InvalidBatchError: if a column is missing or has the wrong rank or inner shape.
        """
        samples = self._loss_columns(samples)
        leaves = [leaf for k in sorted(self._learn_signature)
                  for leaf in tree.flatten_up_to(self._learn_signature[k], samples[k])]
        return checked_tensors(leaves, self._learn_leaves)


def actions_as_numpy(actions):
    """Actions as numpy: one array, or the nest of arrays of a Tuple/Dict action space."""
    if isinstance(actions, tf.Tensor):
        return actions.numpy()
    return tree.map_structure(lambda a: a.numpy(), actions)


def actions_as_tensors(actions):
    """Given actions as tensors: one array, or a nest of arrays (Tuple/Dict action spaces)."""
    if isinstance(actions, (dict, tuple)):
        return tree.map_structure(tf.convert_to_tensor, actions)
    return tf.convert_to_tensor(actions)
