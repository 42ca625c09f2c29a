"""Padding row batches into fixed-length sequences for recurrent models.

Rollout workers record one row per timestep with the recurrent state that was fed in
(`state_in_i`). Before a recurrent policy learns, rows are cut into sequences (where the episode,
the agent or the time step sequence changes, and every `max_seq_len` steps), each padded to
`max_seq_len`, with `seq_lens` [B] and `state_in_i` holding only each sequence's initial state.
Replay-fed optimizers store one padded sequence per replay item (see
tfrl/rollout/replay_output.py) so that minibatches keep sequences whole. Models see the layout described in
tfrl/models/recurrent.py; losses average over the real rows only, with
`mean_over_valid_rows(train_batch)` (built on `sequence_mask`).
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf
import tree

from tfrl.errors import InvalidBatchError
from tfrl.policy.sample_batch import SampleBatch


def pad_batch_to_sequences(batch: SampleBatch, max_seq_len: int) -> SampleBatch:
    """A new batch of B sequences x max_seq_len rows (zero padded) plus `seq_lens`.

    Raises:
        InvalidBatchError: if the batch has no `state_in_0` column or max_seq_len < 1.
    """
    if max_seq_len < 1:
        raise InvalidBatchError(f"max_seq_len must be >= 1, got {max_seq_len}.")
    if SampleBatch.state_in(0) not in batch:
        raise InvalidBatchError(
            "A recurrent policy needs 'state_in_0' (and further state_in_i) columns with the "
            "state fed at each step; record them when collecting rollouts.")
    if SampleBatch.SEQ_LENS in batch:
        return batch
    starts = []
    # A new sequence starts where the episode or the agent changes (several agents of one
    # episode may share a policy), or where time does not run on by one step.
    breaks = np.zeros(batch.count, bool)
    for key in (SampleBatch.EPS_ID, SampleBatch.AGENT_INDEX):
        if key in batch:
            ids = np.asarray(batch[key])
            breaks[1:] |= ids[1:] != ids[:-1]
    if SampleBatch.T in batch:
        t = np.asarray(batch[SampleBatch.T])
        breaks[1:] |= t[1:] != t[:-1] + 1
    for i in range(batch.count):
        if i == 0 or breaks[i] or i - starts[-1] >= max_seq_len:
            starts.append(i)
    bounds = starts + [batch.count]
    seq_lens = np.array([b - a for a, b in zip(bounds, bounds[1:])], np.int32)
    n_seq = len(seq_lens)
    # destination row of every source row
    dest = np.concatenate([np.arange(a, b) - a + k * max_seq_len
                           for k, (a, b) in enumerate(zip(bounds, bounds[1:]))])
    out = {}
    state_keys = [k for k in batch.keys() if k.startswith("state_in_")]
    for key, col in batch.items():
        if key in state_keys:
            out[key] = tree.map_structure(lambda a: a[np.asarray(starts)], col)
            continue

        def pad(a):
            if a.dtype == object:
                padded = np.empty(n_seq * max_seq_len, dtype=object)
            else:
                padded = np.zeros((n_seq * max_seq_len, *a.shape[1:]), a.dtype)
            padded[dest] = a
            return padded

        out[key] = tree.map_structure(pad, col)
    out[SampleBatch.SEQ_LENS] = seq_lens
    return SampleBatch(out)


def sequence_mask(train_batch, max_seq_len=None):
    """Bool mask [rows] of real (non-padding) rows; all True when the batch has no seq_lens.

    Traceable: use it inside loss functions of recurrent policies.
    """
    if SampleBatch.SEQ_LENS not in train_batch:
        some = tree.flatten(train_batch[SampleBatch.REWARDS] if SampleBatch.REWARDS in
                            train_batch else next(iter(train_batch.values())))[0]
        return tf.ones(tf.shape(some)[:1], tf.bool)
    seq_lens = train_batch[SampleBatch.SEQ_LENS]
    rows = tf.shape(tree.flatten(train_batch[SampleBatch.OBS])[0])[0] if max_seq_len is None \
        else None
    time = rows // tf.shape(seq_lens)[0] if max_seq_len is None else max_seq_len
    return tf.reshape(tf.sequence_mask(seq_lens, time), [-1])


def mean_over_valid_rows(train_batch):
    """A function t -> the mean of t [rows] over the real (non-padding) rows of `train_batch`:
    plain `tf.reduce_mean` when the batch has no `seq_lens`. Losses use it so that the zero
    padding of recurrent sequences counts for nothing."""
    if SampleBatch.SEQ_LENS not in train_batch:
        return tf.reduce_mean
    mask = sequence_mask(train_batch)
    return lambda values: tf.reduce_mean(tf.boolean_mask(values, mask))
