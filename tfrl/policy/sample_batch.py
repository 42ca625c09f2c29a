"""SampleBatch and MultiAgentBatch: the unit of experience that flows between components.

A SampleBatch is a dict of columns (RLlib classic). Each column is a numpy array whose first
dimension is the row (timestep) index, or a nested dict/tuple of such arrays (for Dict/Tuple
observation spaces; handled with dm-tree). Rollout workers produce fragments, policies'
`postprocess_trajectory` adds columns (advantages, n-step rewards), policy optimizers
concatenate, shuffle and cut them into minibatches, and the learner turns them into tensors.

`SEQ_LENS` is the one column that is not row-aligned: it exists in batches that were padded
into fixed-length sequences for recurrent models (see tfrl/policy/rnn_sequencing.py).
"""
from __future__ import annotations

from typing import Dict, Iterable, Iterator, List, Sequence

import numpy as np
import tree

from tfrl.errors import InvalidBatchError
from tfrl.utils import compression

DEFAULT_POLICY_ID = "default_policy"


def _to_array(value):
    """numpy arrays stay; dict/tuple structures map leaf-wise; lists of dicts (infos) become
    object arrays; other sequences become numpy arrays."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (dict, tuple)):
        if isinstance(value, dict):
            return {k: _to_array(v) for k, v in value.items()}
        return tuple(_to_array(v) for v in value)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        arr = np.empty(len(value), dtype=object)
        arr[:] = value
        return arr
    return np.asarray(value)


def _first_leaf(value):
    leaves = tree.flatten(value)
    if not leaves:
        raise InvalidBatchError("A SampleBatch column is an empty structure; give it arrays.")
    return leaves[0]


class SampleBatch(dict):
    """A dict of row-aligned numpy columns (plus optional `seq_lens`).

    Construct it like a dict: `SampleBatch(obs=..., actions=...)` or `SampleBatch({...})`.
    Lists are converted to numpy arrays. `len(batch)` and `batch.count` are the number of rows.

    Raises:
        InvalidBatchError: if the row-aligned columns do not all have the same length.
    """

    OBS = "obs"
    CUR_OBS = OBS  # classic RLlib's name of the observation column
    NEXT_OBS = "new_obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    PREV_ACTIONS = "prev_actions"
    PREV_REWARDS = "prev_rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    # classic RLlib's episode-end column: read as terminateds | truncateds where not stored
    DONES = "dones"
    INFOS = "infos"
    EPS_ID = "eps_id"
    UNROLL_ID = "unroll_id"
    ENV_ID = "env_id"  # index of the env within its worker (single-agent env runner)
    AGENT_INDEX = "agent_index"
    T = "t"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    ACTION_PROB = "action_prob"
    ACTION_LOGP = "action_logp"
    VF_PREDS = "vf_preds"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    SEQ_LENS = "seq_lens"
    PRIO_WEIGHTS = "weights"
    TD_ERROR = "td_error"
    N_STEPS = "n_steps"

    @staticmethod
    def state_in(i: int) -> str:
        """Column name of the i-th recurrent state input."""
        return f"state_in_{i}"

    @staticmethod
    def state_out(i: int) -> str:
        """Column name of the i-th recurrent state output."""
        return f"state_out_{i}"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, value in list(dict.items(self)):
            if not isinstance(value, np.ndarray):
                dict.__setitem__(self, key, _to_array(value))
        self.count = self._compute_count()

    # ----- size -------------------------------------------------------------------------
    def _row_keys(self) -> List[str]:
        return [k for k in self.keys() if k != self.SEQ_LENS and not self._is_sequence_state(k)]

    def _is_sequence_state(self, key: str) -> bool:
        # in sequence-padded batches, state_in_i holds one row per sequence, not per timestep
        return self.SEQ_LENS in self and key.startswith("state_in_")

    def _compute_count(self) -> int:
        # runs on every construction and column write: plain arrays skip the nest walk
        count = None
        for key in self._row_keys():
            value = dict.__getitem__(self, key)
            if isinstance(value, np.ndarray):
                n = len(value)
            else:
                leaves = tree.flatten(value)
                if not leaves:
                    continue
                n = len(leaves[-1])
            if count is None:
                count = n
            elif n != count:
                return self._count_or_raise()
        return 0 if count is None else count

    def _count_or_raise(self) -> int:
        lengths = {}
        for key in self._row_keys():
            for leaf in tree.flatten(dict.__getitem__(self, key)):
                lengths[key] = len(leaf)
        if len(set(lengths.values())) > 1:
            raise InvalidBatchError(
                f"SampleBatch columns have different lengths {lengths}; every row-aligned column "
                "must have one entry per timestep.")
        return next(iter(lengths.values()), 0)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return dict.__len__(self) > 0

    def __setitem__(self, key, value):
        value = _to_array(value)
        if (isinstance(value, np.ndarray) and key != self.SEQ_LENS
                and not self._is_sequence_state(key) and dict.__len__(self)
                and len(value) == self.count):
            dict.__setitem__(self, key, value)  # one more column of the batch's length
            return
        if key != self.SEQ_LENS and not self._is_sequence_state(key) and dict.__len__(self):
            n = len(_first_leaf(value))
            if self._row_keys() and n != self.count and not (
                    dict.__len__(self) == 1 and key in self):
                raise InvalidBatchError(
                    f"Column {key!r} has {n} rows but the batch has {self.count}; give one "
                    "entry per timestep.")
        dict.__setitem__(self, key, value)
        self.count = self._compute_count()

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self.slice(key.start or 0, self.count if key.stop is None else key.stop)
        if key == self.DONES and not dict.__contains__(self, key) and dict.__contains__(
                self, self.TERMINATEDS):
            # classic code reads `batch["dones"]` (episode ended, by termination or time limit)
            dones = np.asarray(dict.__getitem__(self, self.TERMINATEDS), bool)
            if dict.__contains__(self, self.TRUNCATEDS):
                dones = dones | np.asarray(dict.__getitem__(self, self.TRUNCATEDS), bool)
            return dones
        return dict.__getitem__(self, key)

    def size_bytes(self) -> int:
        """Approximate memory held by the numeric columns, in bytes."""
        return int(sum(leaf.nbytes for v in self.values() for leaf in tree.flatten(v)
                       if isinstance(leaf, np.ndarray)))

    # ----- copying, slicing, concatenation -------------------------------------------
    def copy(self, shallow: bool = False) -> "SampleBatch":
        """A copy of the batch (column arrays copied unless `shallow`)."""
        if shallow:
            return _of_rows({k: v if isinstance(v, np.ndarray) else _to_array(v)
                             for k, v in self.items()}, self.count)
        return _of_rows({k: np.copy(v) if isinstance(v, np.ndarray)
                         else tree.map_structure(np.copy, v)
                         for k, v in self.items()}, self.count)

    def slice(self, start: int, end: int) -> "SampleBatch":
        """Rows [start, end) as a new batch (views, not copies).

        Raises:
            InvalidBatchError: if the batch is padded into sequences (has `seq_lens`).
        """
        self._require_not_sequenced("slice")
        return _of_rows({k: v[start:end] if isinstance(v, np.ndarray)
                         else tree.map_structure(lambda a: a[start:end], v)
                         for k, v in self.items()}, len(range(self.count)[start:end]))

    def take(self, indices: np.ndarray) -> "SampleBatch":
        """The rows at `indices` as a new batch (copies)."""
        self._require_not_sequenced("take")
        return SampleBatch({k: tree.map_structure(lambda a: a[indices], v)
                            for k, v in self.items()})

    def concat(self, other: "SampleBatch") -> "SampleBatch":
        """This batch followed by `other` (a new batch).

        Raises:
            InvalidBatchError: if the two batches do not have the same columns.
        """
        return concat_samples([self, other])

    def _require_not_sequenced(self, what: str):
        if self.SEQ_LENS in self:
            raise InvalidBatchError(
                f"Cannot {what} a batch padded into sequences (it has 'seq_lens'); {what} the "
                "unpadded batch before calling rnn_sequencing.pad_batch_to_sequences.")

    # ----- row orderings -------------------------------------------------------------
    def shuffle(self, seed: int | None = None) -> "SampleBatch":
        """Permute the rows in place with a random permutation; returns self.

        Raises:
            InvalidBatchError: if the batch is padded into sequences (has `seq_lens`).
        """
        self._require_not_sequenced("shuffle")
        perm = np.random.default_rng(seed).permutation(self.count)
        for k in list(self.keys()):
            dict.__setitem__(self, k, tree.map_structure(lambda a: a[perm], self[k]))
        return self

    def split_by_episode(self) -> List["SampleBatch"]:
        """Contiguous pieces with one episode each.

        Uses the `eps_id` column when present; otherwise cuts after each row whose
        `terminateds` or `truncateds` flag is set.

        Raises:
            InvalidBatchError: if neither `eps_id` nor `terminateds` is present.
        """
        if self.count == 0:
            return []
        if self.EPS_ID in self:
            ids = np.asarray(self[self.EPS_ID])
            cuts = list(np.nonzero(ids[1:] != ids[:-1])[0] + 1)
        elif self.TERMINATEDS in self:
            ends = np.asarray(self[self.TERMINATEDS], dtype=bool)
            if self.TRUNCATEDS in self:
                ends = ends | np.asarray(self[self.TRUNCATEDS], dtype=bool)
            cuts = [i + 1 for i in np.nonzero(ends)[0] if i + 1 < self.count]
        else:
            raise InvalidBatchError(
                "split_by_episode needs an 'eps_id' or a 'terminateds' column to find episode "
                "boundaries; add one when collecting the batch.")
        bounds = [0] + [int(c) for c in cuts] + [self.count]
        return [self.slice(a, b) for a, b in zip(bounds, bounds[1:])]

    def rows(self) -> Iterator[Dict]:
        """Iterate over rows as dicts of per-row values."""
        self._require_not_sequenced("iterate rows of")
        for i in range(self.count):
            yield {k: tree.map_structure(lambda a: a[i], v) for k, v in self.items()}

    def columns(self, keys: Sequence[str]) -> List:
        """The columns named by `keys`, in order.

        Raises:
            InvalidBatchError: if a column is missing.
        """
        missing = [k for k in keys if k not in self]
        if missing:
            raise InvalidBatchError(
                f"Batch has no column(s) {missing}; it has {sorted(self.keys())}.")
        return [self[k] for k in keys]

    def timeslices(self, size: int) -> List["SampleBatch"]:
        """Consecutive slices of `size` rows (the last may be shorter)."""
        return [self.slice(i, min(i + size, self.count)) for i in range(0, self.count, size)]

    def minibatches(self, minibatch_size: int, shuffle: bool = True, seed: int | None = None,
                    drop_last: bool = False) -> Iterator["SampleBatch"]:
        """Iterate over minibatches of `minibatch_size` rows (one pass over the data).

        Raises:
            InvalidBatchError: if `minibatch_size` is not positive.
        """
        if minibatch_size <= 0:
            raise InvalidBatchError(f"minibatch_size must be positive, got {minibatch_size}.")
        order = (np.random.default_rng(seed).permutation(self.count) if shuffle
                 else np.arange(self.count))
        for i in range(0, self.count, minibatch_size):
            idx = order[i:i + minibatch_size]
            if drop_last and len(idx) < minibatch_size:
                return
            yield self.take(idx)

    # ----- compression ---------------------------------------------------------------
    def compress(self, columns: Iterable[str] = (OBS, NEXT_OBS)) -> "SampleBatch":
        """lz4-compress each row of the given columns in place; returns self.

        A compressed column becomes an object array of bytes (one per row), so slicing and
        concatenation still work; `decompress_if_needed` restores it. Missing columns are
        skipped.

        Raises:
            InvalidBatchError: if a column holds Python objects.
        """
        for key in columns:
            if key not in self or _is_compressed(self[key]):
                continue

            def pack_rows(a):
                out = np.empty(len(a), dtype=object)
                out[:] = [compression.pack(row) for row in a]
                return out

            dict.__setitem__(self, key, tree.map_structure(pack_rows, self[key]))
        return self

    def decompress_if_needed(self, columns: Iterable[str] = (OBS, NEXT_OBS)) -> "SampleBatch":
        """Undo `compress` for the given columns in place; returns self.

        Raises:
            InvalidBatchError: if a compressed value is corrupt.
        """
        for key in columns:
            if key in self and _is_compressed(self[key]):
                dict.__setitem__(self, key, tree.map_structure(
                    lambda a: np.stack([compression.unpack(bytes(r)) for r in a])
                    if len(a) else a, self[key]))
        return self

    # ----- multi-agent ---------------------------------------------------------------
    def as_multi_agent(self) -> "MultiAgentBatch":
        """This batch as a MultiAgentBatch under the default policy id."""
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.count)

    def __repr__(self):
        return f"SampleBatch(count={self.count}, columns={sorted(self.keys())})"

    def __reduce__(self):
        return (SampleBatch, (dict(self),))


def _of_rows(columns: Dict, count: int) -> SampleBatch:
    """A batch of already converted columns known to hold `count` rows (copies and slices of a
    batch), built without the constructor's conversions and length checks."""
    batch = dict.__new__(SampleBatch)
    dict.update(batch, columns)
    batch.count = count
    return batch


def _is_compressed(column) -> bool:
    leaf = _first_leaf(column)
    return (isinstance(leaf, np.ndarray) and leaf.dtype == object and len(leaf) > 0
            and compression.is_packed(leaf[0]))


def _concat_leaves(*leaves):
    if all(isinstance(x, np.ndarray) and x.dtype == object for x in leaves):
        out = np.empty(sum(len(x) for x in leaves), dtype=object)
        out[:] = [item for x in leaves for item in x]
        return out
    return np.concatenate(leaves, axis=0)


def concat_samples(samples: Sequence) -> "SampleBatch | MultiAgentBatch":
    """Concatenate SampleBatches (or MultiAgentBatches) in order.

    Empty batches are skipped. Batches padded into sequences concatenate their `seq_lens`.

    Raises:
        InvalidBatchError: if the non-empty batches do not all have the same columns, or
            SampleBatches and MultiAgentBatches are mixed.
    """
    samples = list(samples)
    if any(isinstance(s, MultiAgentBatch) for s in samples):
        if not all(isinstance(s, MultiAgentBatch) for s in samples):
            raise InvalidBatchError(
                "Cannot concatenate SampleBatches with MultiAgentBatches; convert with "
                "SampleBatch.as_multi_agent() first.")
        return MultiAgentBatch.concat_samples(samples)
    nonempty = [s for s in samples if s.count > 0 or SampleBatch.SEQ_LENS in s]
    if not nonempty:
        return SampleBatch()
    if len(nonempty) == 1:  # the common case of one trajectory piece: a copy
        only = nonempty[0]
        return _of_rows({k: v.copy() if isinstance(v, np.ndarray) and v.ndim and v.dtype != object
                         else tree.map_structure(_concat_leaves, v)
                         for k, v in only.items()}, only.count)
    keys = set(nonempty[0].keys())
    for s in nonempty[1:]:
        if set(s.keys()) != keys:
            raise InvalidBatchError(
                f"Cannot concatenate batches with different columns: {sorted(keys)} vs "
                f"{sorted(s.keys())}; make every fragment carry the same columns.")
    out = {}
    for k in nonempty[0].keys():
        columns = [s[k] for s in nonempty]
        if all(isinstance(c, np.ndarray) and c.dtype != object for c in columns):
            out[k] = np.concatenate(columns, axis=0)
        else:
            out[k] = tree.map_structure(_concat_leaves, *columns)
    return SampleBatch(out)


# RLlib's classic spelling: `SampleBatch.concat_samples([...])`, the same function.
SampleBatch.concat_samples = staticmethod(concat_samples)


class MultiAgentBatch:
    """Per-policy SampleBatches of one rollout, plus the number of env steps they cover.

    `count` is the number of environment steps; `agent_steps()` is the total rows over all
    policies (several agents act in one env step).
    """

    def __init__(self, policy_batches: Dict[str, SampleBatch], env_steps: int):
        self.policy_batches = dict(policy_batches)
        self.count = int(env_steps)

    def env_steps(self) -> int:
        return self.count

    def agent_steps(self) -> int:
        return sum(b.count for b in self.policy_batches.values())

    def __len__(self) -> int:
        return self.count

    @staticmethod
    def wrap_as_needed(policy_batches: Dict[str, SampleBatch], env_steps: int):
        """A plain SampleBatch if only the default policy is present, else a MultiAgentBatch."""
        if len(policy_batches) == 1 and DEFAULT_POLICY_ID in policy_batches:
            return policy_batches[DEFAULT_POLICY_ID]
        return MultiAgentBatch(policy_batches, env_steps)

    @staticmethod
    def concat_samples(samples: Sequence["MultiAgentBatch"]) -> "MultiAgentBatch":
        """Concatenate per policy; env steps add up.

        Raises:
            InvalidBatchError: if a policy's batches have different columns.
        """
        grouped: Dict[str, list] = {}
        env_steps = 0
        for s in samples:
            env_steps += s.count
            for pid, b in s.policy_batches.items():
                grouped.setdefault(pid, []).append(b)
        return MultiAgentBatch({pid: concat_samples(bs) for pid, bs in grouped.items()},
                               env_steps)

    def copy(self) -> "MultiAgentBatch":
        return MultiAgentBatch({k: v.copy() for k, v in self.policy_batches.items()}, self.count)

    def size_bytes(self) -> int:
        return sum(b.size_bytes() for b in self.policy_batches.values())

    def compress(self, columns: Iterable[str] = (SampleBatch.OBS, SampleBatch.NEXT_OBS)):
        """Compress the given columns of every policy batch in place; returns self."""
        for b in self.policy_batches.values():
            b.compress(columns)
        return self

    def decompress_if_needed(self, columns: Iterable[str] = (SampleBatch.OBS,
                                                               SampleBatch.NEXT_OBS)):
        """Undo `compress` in every policy batch in place; returns self."""
        for b in self.policy_batches.values():
            b.decompress_if_needed(columns)
        return self

    def __repr__(self):
        return f"MultiAgentBatch(env_steps={self.count}, policies={self.policy_batches})"
