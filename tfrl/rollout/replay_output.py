"""Replay output: rollout workers write postprocessed experience straight into a replay table.

Layout (fixed by the design): every postprocessed step becomes ONE replay item of sequence
length 1 with the time dimension squeezed; its columns are a fixed, ordered dict of SampleBatch
columns cast to fixed dtypes. A worker appends all steps a policy contributed to a fragment
through that policy's `replay.TrajectoryWriter` (one per policy and replay shard, opened at the
policy's first write: a writer's steps all have the specs of its first step, and policies of a
multi-agent config may differ in spaces and columns), whose chunks hold `chunk_length` steps
(default: the rollout fragment length), so the step items of a fragment share their chunks and
each chunk crosses the wire once. A single-policy worker therefore has one writer per shard.
An item's priority is 1.0, or the step's value in the `priorities` column when the policy's
postprocessing added one. Bulk data goes from the worker to the replay server; the driver only
sees counts.

Recurrent policies: an item is one *sequence* instead of one step. The fragment is cut into
sequences of at most `max_seq_len` steps (`rnn_sequencing.pad_batch_to_sequences`: at episode
and agent boundaries), each zero-padded to `max_seq_len`; the item holds every step column with
shape [max_seq_len, ...], the recurrent state fed at the sequence's first step (`state_in_i`)
and the true length (`seq_lens`). A learner that samples items therefore always gets whole
sequences with the state to start them from, which is what a recurrent loss needs.

Trajectory fragments (`ReplayOutputSpec.item_length`, IMPALA's data path): an item is `item_length`
consecutive steps of ONE env, in step order, episode boundaries included (the `terminateds` /
`truncateds` columns mark them); every step column gets a leading time dimension
(`fragment_signature`). Each env's steps are appended in order, so the item covers exactly one
chunk and items of one worker enter a queue table in the order they were sampled.

`replay_columns` and `replay_signature` derive the columns and the table signature (a dict of
`replay.specs.TensorSpec`) from a policy by running a two-step dummy trajectory through its
`compute_actions` and `postprocess_trajectory`: the trainer creates the table with that
signature and the learner reads it back with `ReplayDataset.from_table_signature`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import tree

from tfrl import errors
from tfrl.errors import InvalidBatchError
from tfrl.offline.item_layout import repeated_next_obs_mask
from tfrl.policy.sample_batch import SampleBatch
from tfrl.rollout.trajectory import batched_policy_outputs
from tfrl.utils.rows import zero_rows

BASE_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.REWARDS, SampleBatch.NEXT_OBS,
                SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS)
# columns a policy's postprocessing or action outputs may add that losses read
LOSS_COLUMNS = (SampleBatch.ACTION_LOGP, SampleBatch.ACTION_DIST_INPUTS, SampleBatch.VF_PREDS,
                SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS, SampleBatch.N_STEPS)
PRIORITY_COLUMN = "priorities"
# columns the learner supplies when it samples (importance weights), never written by workers
SAMPLING_COLUMNS = (SampleBatch.PRIO_WEIGHTS,)


def canonical_dtype(dtype: np.dtype) -> np.dtype:
    """The fixed replay dtype of a column dtype: floats float32, bools bool, bytes (images)
    uint8, other integers int64."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype(np.float32)
    if dtype.kind == "b":
        return np.dtype(bool)
    if dtype.kind == "u" and dtype.itemsize == 1:
        return np.dtype(np.uint8)
    if dtype.kind in "iu":
        return np.dtype(np.int64)
    raise errors.UnsupportedSpaceError(
        f"a column of dtype {dtype} cannot be written into replay; use numeric columns")


def dummy_trajectory(policy, observation_filter: str = "NoFilter") -> SampleBatch:
    """A two-step trajectory of `policy` on observations sampled from its space, postprocessed
    as a sampled fragment is (`postprocess_trajectory`, then `postprocess_fragment`).

    Raises:
      whatever the policy raises on data of its own spaces.
    """
    space = policy.observation_space
    rows = [space.sample() for _ in range(3)]
    obs = tree.map_structure(lambda *xs: np.stack(xs), *rows)
    if observation_filter not in (None, "NoFilter"):
        obs = tree.map_structure(lambda a: a.astype(np.float32), obs)
    initial = [np.asarray(s) for s in (policy.get_initial_state() or [])]
    states = [np.stack([s] * 2) for s in initial]
    first_two = tree.map_structure(lambda a: a[:2], obs)
    actions, state_out, extra = batched_policy_outputs(*policy.compute_actions(
        first_two, state_batches=states or None, explore=False))
    batch = {
        SampleBatch.OBS: first_two,
        SampleBatch.ACTIONS: actions,
        SampleBatch.REWARDS: np.zeros(2, np.float32),
        SampleBatch.NEXT_OBS: tree.map_structure(lambda a: a[1:], obs),
        SampleBatch.TERMINATEDS: np.array([False, False]),
        SampleBatch.TRUNCATEDS: np.array([False, True]),
        SampleBatch.EPS_ID: np.zeros(2, np.int64),
        SampleBatch.AGENT_INDEX: np.zeros(2, np.int64),
        SampleBatch.UNROLL_ID: np.zeros(2, np.int64),
        SampleBatch.T: np.arange(2, dtype=np.int64),
    }
    batch.update(extra)
    if getattr(policy, "reads_prev_action_reward", False):
        batch[SampleBatch.PREV_ACTIONS] = zero_rows(policy.action_space, 2)
        batch[SampleBatch.PREV_REWARDS] = np.zeros(2, np.float32)
    for k, s in enumerate(states):
        batch[SampleBatch.state_in(k)] = s
        batch[SampleBatch.state_out(k)] = state_out[k]
    # looked up on the class: a numpy stand-in's instance lookup would build its TF policy
    dummy = getattr(type(policy), "postprocessing_a_dummy_batch", None)
    with dummy(policy) if dummy is not None else contextlib.nullcontext():
        postprocessed = policy.postprocess_trajectory(SampleBatch(batch), None, None)
    return policy.postprocess_fragment(postprocessed)


def sequence_length(policy) -> Optional[int]:
    """`max_seq_len` of a recurrent policy (its replay items are sequences), else None."""
    if not policy.is_recurrent():
        return None
    return int(policy.config["model"]["max_seq_len"])


def _is_sequence_column(name: str) -> bool:
    """Columns holding one value per sequence rather than one per step."""
    return name == SampleBatch.SEQ_LENS or name.startswith("state_in_")


def _default_columns(policy, batch) -> tuple:
    columns = BASE_COLUMNS + tuple(c for c in LOSS_COLUMNS + (PRIORITY_COLUMN,) if c in batch)
    if sequence_length(policy):
        columns += tuple(SampleBatch.state_in(k) for k in range(len(policy.get_initial_state())))
        columns += (SampleBatch.SEQ_LENS,)
    # Classic RLlib hands every postprocessed column to the loss: a column the policy's
    # postprocessing adds (`returns`) and its loss reads (the loss signature, tracked on the
    # postprocessed dummy batch) travels too, without the policy declaring replay columns.
    loss_reads = getattr(policy, "loss_input_signature", None) or {}
    columns += tuple(c for c in sorted(loss_reads)
                     if c in batch and c not in columns and c not in SAMPLING_COLUMNS)
    return columns


def replay_columns(policy, observation_filter: str = "NoFilter") -> tuple:
    """The default item columns of `policy`: BASE_COLUMNS plus the LOSS_COLUMNS (and
    `priorities`) its action outputs and postprocessing produce, in that order; for a
    recurrent policy also `state_in_i` and `seq_lens`; then any other column its
    postprocessing produces that its loss reads (`loss_input_signature`), except the
    SAMPLING_COLUMNS the learner supplies."""
    return _default_columns(policy, dummy_trajectory(policy, observation_filter))


def replay_signature(policy, columns: Optional[Sequence[str]] = None,
                     observation_filter: str = "NoFilter") -> Dict[str, Any]:
    """The replay table signature of `policy`'s step items: an ordered dict column -> TensorSpec
    (nests of them for Dict/Tuple observations), shapes without the batch dimension.

    Raises:
      InvalidBatchError: a requested column that the policy's trajectories do not have.
    """
    from replay.specs import TensorSpec

    batch = dummy_trajectory(policy, observation_filter)
    max_seq_len = sequence_length(policy)
    columns = tuple(columns) if columns is not None else _default_columns(policy, batch)
    missing = [c for c in columns if c not in batch
               and not (max_seq_len and c == SampleBatch.SEQ_LENS)]
    if missing:
        raise InvalidBatchError(
            f"the trajectories of {type(policy).__name__} have no column(s) {missing}; choose "
            f"replay columns among {sorted(batch.keys())}")

    def spec(column, array):
        array = np.asarray(array)
        shape = array.shape[1:]
        if max_seq_len and not _is_sequence_column(column):
            shape = (max_seq_len, *shape)
        return TensorSpec(shape, canonical_dtype(array.dtype), column)

    signature = {}
    for c in columns:
        if c == SampleBatch.SEQ_LENS and max_seq_len:
            signature[c] = TensorSpec((), np.dtype(np.int64), c)
        else:
            signature[c] = tree.map_structure(lambda a, c=c: spec(c, a), batch[c])
    return signature


def fragment_signature(step_signature: Dict[str, Any], item_length: int) -> Dict[str, Any]:
    """The table signature of trajectory-fragment items: every spec of `step_signature` (one
    step, from `replay_signature`) with a leading time dimension of `item_length`."""
    from replay.specs import TensorSpec

    return {name: tree.map_structure(
        lambda s: TensorSpec((int(item_length), *s.shape), s.dtype, s.name), spec)
        for name, spec in step_signature.items()}


@dataclasses.dataclass(frozen=True)
class ReplayOutputSpec:
    """How workers write into replay; picklable, handed to every worker.

    Args:
      address: "host:port" of the replay server, or a list of them: replay shards serving the
        same tables; each `write` then goes whole to one shard, the next write to the next
        (starting at a shard picked by the worker's process id, so workers spread out).
      table: the table name, or a dict policy_id -> table name for multi-agent (policies not in
        the dict are not written).
      columns: item columns (default: `replay_columns(policy)`); may be a dict per policy id.
      chunk_length: steps per chunk (default: the rollout fragment length).
      max_in_flight_items: unacknowledged items beyond which a writer blocks (each policy's
        writer counts its own).
      flush_timeout: seconds to wait for the server's acks at the end of each sample (None:
        forever).
      max_unacked_after_write: items a write may leave unacknowledged when it returns
        (Reverb's `flush(block_until_num_items)`; all policies' writers together). 0: every
        written item is in the table when `sample()` returns. A positive value lets the worker
        step its envs while the server is still inserting the previous fragment (replay-fed
        off-policy learners set one round of steps); an error of those items is raised by a
        later write or by `close`.
      token: the replay server's access token, if it needs one.
      root_certificates: PEM bytes of the certificate to trust when the server uses TLS.
      item_length: when set, items are trajectory fragments of this many consecutive steps of
        one env (see the module docstring) instead of single steps; the table signature is
        `fragment_signature(replay_signature(policy), item_length)`.
      drop_repeated_next_obs: with `item_length`, the `new_obs` rows that the item's own `obs`
        column already holds (step t's next observation is step t+1's observation unless t
        ends an episode or the item) are written as zeros, which lz4 compresses to almost
        nothing, so frames are not stored twice; readers put them back with
        `restore_next_obs`.
    """

    address: Union[str, Sequence[str]]
    table: Union[str, Dict[str, str]]
    columns: Optional[Union[Sequence[str], Dict[str, Sequence[str]]]] = None
    chunk_length: Optional[int] = None
    max_in_flight_items: int = 2000
    flush_timeout: Optional[float] = 60.0
    max_unacked_after_write: int = 0
    token: Optional[str] = None
    root_certificates: Optional[bytes] = None
    item_length: Optional[int] = None
    drop_repeated_next_obs: bool = False

    def make(self, policy_map: Dict[str, Any], policies_to_train: Sequence[str],
             rollout_fragment_length: int = 200,
             observation_filter: str = "NoFilter") -> "ReplayOutput":
        return ReplayOutput(self, policy_map, policies_to_train, rollout_fragment_length,
                            observation_filter)


class ReplayOutput:
    """A worker's writer into replay (see the module docstring).

    Raises (at construction):
      InvalidConfigError: a table dict naming unknown policies, or a single table name for
        several policies to train.
      InvalidBatchError: requested columns the policy does not produce.
    """

    def __init__(self, spec: ReplayOutputSpec, policy_map: Dict[str, Any],
                 policies_to_train: Sequence[str], rollout_fragment_length: int = 200,
                 observation_filter: str = "NoFilter"):
        from replay.client import Client

        self.spec = spec
        if isinstance(spec.table, str):
            if len(policies_to_train) != 1:
                raise errors.InvalidConfigError(
                    f"replay output: one table {spec.table!r} for {len(policies_to_train)} policies "
                    f"to train {list(policies_to_train)}; give a dict policy_id -> table")
            self.tables = {policies_to_train[0]: spec.table}
        else:
            unknown = [pid for pid in spec.table if pid not in policy_map]
            if unknown:
                raise errors.InvalidConfigError(
                    f"replay output names unknown policies {unknown}; known: {list(policy_map)}")
            self.tables = dict(spec.table)
        self.signatures = {}
        self.sequence_lengths = {pid: sequence_length(policy_map[pid]) for pid in self.tables}
        for pid in self.tables:
            columns = spec.columns.get(pid) if isinstance(spec.columns, dict) else spec.columns
            self.signatures[pid] = replay_signature(policy_map[pid], columns, observation_filter)
        addresses = [spec.address] if isinstance(spec.address, str) else list(spec.address)
        if not addresses:
            raise errors.InvalidConfigError("replay output: no replay server address given")
        self.clients = [Client(a, token=spec.token, root_certificates=spec.root_certificates)
                        for a in addresses]
        self.client = self.clients[0]
        self.chunk_length = int(spec.chunk_length or rollout_fragment_length)
        self.item_length = int(spec.item_length) if spec.item_length else None
        if self.item_length:
            recurrent = [pid for pid, n in self.sequence_lengths.items() if n]
            if recurrent:
                raise errors.InvalidConfigError(
                    f"replay output: trajectory-fragment items (item_length={self.item_length}) "
                    f"are not supported for recurrent policies {recurrent}; use a feed-forward "
                    "model")
            self.chunk_length = self.item_length
        # (shard, policy id) -> that policy's writer on that shard, opened at its first write: a
        # writer fixes its step specs at its first step, and policies' signatures differ
        self._writers: Dict[Tuple[int, str], Any] = {}
        self._shard = os.getpid() % len(self.clients)  # the shard the next write goes to
        self.items_written = 0
        self.items_written_per_shard = [0] * len(self.clients)

    def _shard_writers(self) -> List[Any]:
        """The open writers of the shard the current write goes to, in the order they opened."""
        return [w for (shard, _), w in self._writers.items() if shard == self._shard]

    def _get_writer(self, pid: str):
        """`pid`'s writer on the shard the current write goes to (opened at first use)."""
        key = (self._shard, pid)
        if key not in self._writers:
            self._writers[key] = self.clients[self._shard].trajectory_writer(
                num_keep_alive_refs=self.item_length or 1, chunk_length=self.chunk_length,
                max_in_flight_items=self.spec.max_in_flight_items)
        return self._writers[key]

    def write(self, batch: Any) -> Dict[str, int]:
        """Writes the rows of `batch` (SampleBatch or MultiAgentBatch) as step items and waits
        for the server's acks; returns {policy_id: items written}.

        Raises:
          InvalidBatchError: a column of the signature is missing from the batch.
          replay.errors.ReplayError: the server refused the items or went away (the writers of
            that shard are dropped, unflushed items with them, and new ones are opened at the
            next write).
        """
        if hasattr(batch, "policy_batches"):
            batches = batch.policy_batches
        else:
            batches = {next(iter(self.tables)): batch}
        written = {}
        try:
            for pid, b in batches.items():
                if pid in self.tables and b.count:
                    written[pid] = self._write_policy_batch(pid, b)
            self._flush_shard()
        except Exception:
            self._drop_shard_writers()
            raise
        self.items_written += sum(written.values())
        self.items_written_per_shard[self._shard] += sum(written.values())
        self._shard = (self._shard + 1) % len(self.clients)
        return written

    def _flush_shard(self) -> None:
        """Waits until at most `max_unacked_after_write` items of this shard's writers, all
        together, are unacknowledged: each writer in turn may leave what the earlier ones left
        of that budget (acks only lower a writer's count afterwards)."""
        budget = self.spec.max_unacked_after_write
        timeout = self.spec.flush_timeout
        for writer in self._shard_writers():
            writer.flush(block_until_num_items=budget, timeout_ms=None if timeout is None else int(timeout * 1000))
            budget = max(0, budget - writer.num_unacked_items)

    def _write_policy_batch(self, pid: str, batch: SampleBatch) -> int:
        signature = self.signatures[pid]
        max_seq_len = self.sequence_lengths[pid]
        for name in signature:
            if name not in batch and not (max_seq_len and name == SampleBatch.SEQ_LENS):
                raise InvalidBatchError(
                    f"the batch of policy {pid!r} has no column {name!r} that the replay table "
                    f"{self.tables[pid]!r} expects; its columns are {sorted(batch.keys())}")
        if max_seq_len:
            batch = _as_sequences(batch, signature, max_seq_len)
        if self.item_length:
            return self._write_fragments(pid, batch, signature)
        columns = {name: tree.map_structure(lambda a, s: np.asarray(a, dtype=s.dtype),
                                            batch[name], spec)
                   for name, spec in signature.items()}
        n = len(tree.flatten(columns[next(iter(columns))])[0])
        if PRIORITY_COLUMN in batch:
            priorities = np.asarray(batch[PRIORITY_COLUMN], np.float64)
            if max_seq_len:  # a sequence is as urgent as its most urgent step
                priorities = priorities.max(axis=1)
        else:
            priorities = np.ones(n)
        self._get_writer(pid).append_step_items(self.tables[pid], columns, priorities)
        return n

    def _write_fragments(self, pid: str, batch: SampleBatch, signature: Dict[str, Any]) -> int:
        """Writes each env's rows of `batch` as items of `item_length` consecutive steps;
        returns the number of items."""
        length = self.item_length
        if SampleBatch.ENV_ID not in batch:
            raise InvalidBatchError(
                f"trajectory-fragment items need the {SampleBatch.ENV_ID!r} column of the "
                "single-agent env runner; multi-agent batches cannot be written as fragments")
        env_ids = np.asarray(batch[SampleBatch.ENV_ID])
        # rows of one env are in step order in the batch; a stable sort keeps that order
        order = np.argsort(env_ids, kind="stable")
        counts = np.bincount(env_ids)
        uneven = [int(i) for i, c in enumerate(counts) if c % length]
        if uneven:
            raise InvalidBatchError(
                f"env(s) {uneven} of the batch have {[int(counts[i]) for i in uneven]} rows, not a "
                f"multiple of item_length={length}; sample with batch_mode='truncate_episodes' "
                f"and rollout_fragment_length={length}")
        columns = {name: tree.map_structure(lambda a, s: np.asarray(a, dtype=s.dtype)[order],
                                            batch[name], spec)
                   for name, spec in signature.items()}
        priorities = (np.asarray(batch[PRIORITY_COLUMN], np.float64)[order]
                      if PRIORITY_COLUMN in batch else None)
        if self.spec.drop_repeated_next_obs:
            columns[SampleBatch.NEXT_OBS] = _drop_repeated_next_obs(columns, length)
        writer = self._get_writer(pid)
        table = self.tables[pid]
        names = list(columns)
        nested = any(tree.is_nested(columns[c]) for c in names)
        n = len(order)
        # One `extend` per item: its `length` steps in one call and one chunk (chunk_length is
        # item_length), and the item the history's last `length` steps of every column, which
        # the writer sends as one slice per column without a reference per step.
        for start in range(0, n, length):
            end = start + length
            if nested:
                steps = {c: tree.map_structure(lambda a: a[start:end], columns[c]) for c in names}
            else:
                steps = {c: columns[c][start:end] for c in names}
            writer.extend(steps)
            priority = 1.0 if priorities is None else float(priorities[start:end].max())
            writer.create_item(table, priority, tree.map_structure(lambda h: h[-length:], writer.history))
        return n // length

    def _drop_shard_writers(self) -> None:
        """Closes the current shard's writers without waiting (after a failed write: their
        unflushed items are lost); the next write there opens new ones."""
        for key in [k for k in self._writers if k[0] == self._shard]:
            writer = self._writers.pop(key)
            try:
                writer.close(flush=False)
            except Exception:  # noqa: BLE001 - the stream is already broken
                pass

    def close(self) -> None:
        """Flushes and closes the writers (the first error is raised after all are closed)."""
        writers, self._writers = self._writers, {}
        error = None
        for writer in writers.values():
            try:
                writer.close(flush=True)
            except Exception as exc:  # noqa: BLE001 - close the others first
                error = error or exc
        if error is not None:
            raise error


def _drop_repeated_next_obs(columns: Dict[str, Any], item_length: int) -> Any:
    """`new_obs` with zeros in the rows `repeated_next_obs_mask` marks (see
    ReplayOutputSpec.drop_repeated_next_obs).

    Raises:
      InvalidBatchError: a marked row differs from the next row's observation (a reader would
        rebuild it wrong), or the columns it needs are not written.
    """
    needed = (SampleBatch.OBS, SampleBatch.NEXT_OBS, SampleBatch.TERMINATEDS,
              SampleBatch.TRUNCATEDS)
    missing = [c for c in needed if c not in columns]
    if missing:
        raise InvalidBatchError(
            f"drop_repeated_next_obs needs the columns {list(needed)}; {missing} are not "
            "written. Add them to the replay columns or turn drop_repeated_next_obs off")
    repeated = repeated_next_obs_mask(columns[SampleBatch.TERMINATEDS],
                                      columns[SampleBatch.TRUNCATEDS], item_length)
    rows = np.flatnonzero(repeated)

    def drop(obs, new_obs):
        if not np.array_equal(new_obs[rows], obs[rows + 1],
                              equal_nan=np.issubdtype(obs.dtype, np.floating)):
            raise InvalidBatchError(
                "drop_repeated_next_obs: a step's new_obs differs from the next step's obs "
                "inside an episode, so it cannot be rebuilt from the fragment; write fragments "
                "of consecutive steps of one env (batch_mode='truncate_episodes') or turn "
                "drop_repeated_next_obs off")
        out = np.array(new_obs, copy=True)
        out[rows] = 0
        return out

    return tree.map_structure(drop, columns[SampleBatch.OBS], columns[SampleBatch.NEXT_OBS])


def restore_next_obs(data: Dict[str, Any], item_length: int) -> Dict[str, Any]:
    """The inverse of `drop_repeated_next_obs` on one sampled fragment item (TF tensors, time
    first): `new_obs[t]` = `obs[t + 1]` where `repeated_next_obs_mask` holds, the stored
    `new_obs[t]` elsewhere. Exact whether or not the writer dropped the rows."""
    import tensorflow as tf

    repeated = repeated_next_obs_mask(data[SampleBatch.TERMINATEDS],
                                      data[SampleBatch.TRUNCATEDS], item_length)

    def restore(obs, new_obs):
        shifted = tf.concat([obs[1:], new_obs[-1:]], axis=0)
        mask = tf.reshape(repeated, [-1] + [1] * (len(obs.shape) - 1))
        return tf.where(mask, shifted, new_obs)

    data = dict(data)
    data[SampleBatch.NEXT_OBS] = tree.map_structure(restore, data[SampleBatch.OBS],
                                                    data[SampleBatch.NEXT_OBS])
    return data


def _as_sequences(batch: SampleBatch, signature: Dict[str, Any], max_seq_len: int) -> dict:
    """The signature's columns of `batch` cut into zero-padded sequences: step columns
    [num_sequences, max_seq_len, ...], `state_in_i` [num_sequences, ...] (the state fed at each
    sequence's first step) and `seq_lens` [num_sequences]."""
    from tfrl.policy.rnn_sequencing import pad_batch_to_sequences

    boundaries = (SampleBatch.EPS_ID, SampleBatch.AGENT_INDEX, SampleBatch.T)
    kept = {c: batch[c] for c in list(signature) + list(boundaries) + [PRIORITY_COLUMN]
            if c in batch and c != SampleBatch.SEQ_LENS}
    padded = pad_batch_to_sequences(SampleBatch(kept), max_seq_len)
    num_sequences = len(padded[SampleBatch.SEQ_LENS])
    out = {}
    for name in signature:
        column = padded[name]
        if _is_sequence_column(name):
            out[name] = column
        else:
            out[name] = tree.map_structure(
                lambda a: a.reshape(num_sequences, max_seq_len, *a.shape[1:]), column)
    if PRIORITY_COLUMN in batch and PRIORITY_COLUMN not in out:
        out[PRIORITY_COLUMN] = padded[PRIORITY_COLUMN].reshape(num_sequences, max_seq_len)
    return out
