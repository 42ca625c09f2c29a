"""ReplayInput: an InputReader that samples its batches from a table of a running replay server.

Where it sits: next to FileInput (input_reader.py) as a source of recorded experience for a
`RolloutWorker`; `make_input_reader` (sources.py) builds it when `input` names a replay table. The table is
any table of a `replay.Server` (or `replay-server`), for example one restored from a replay
checkpoint (`replay-server --checkpoint-dir DIR`, `Server(..., checkpointer=Checkpointer(DIR))`,
or a trainer's `replay_checkpoint`), whose items hold SampleBatch columns by name: the tables
tfrl's replay writers fill (`tfrl/rollout/replay_output.py`: step items, or trajectory
fragments of `item_length` steps, whose time dimension is flattened into rows).

Spellings of `input`:

    "replay://HOST:PORT/TABLE"                  a URL; query parameters set the options below,
                                                e.g. "replay://localhost:9000/cartpole?batch_size=500"
    {"replay": {"address": "HOST:PORT", "table": "TABLE", ...options}}
    {"sampler": 0.5, "replay://HOST:PORT/TABLE": 0.5}   mixing (mixed_input.py) takes the URL

Options: `batch_size` (rows per `next()`, default 200), `timeout_s` (seconds a batch may wait
for samples before ReplayInputError; None waits forever; default 60), `token_file` (a file
holding the server's access token), `root_certificates` (a PEM file of the certificate to
trust: connects over TLS). Each `next()` samples `batch_size` rows with the table's own
sampler (uniform, prioritized, FIFO, ...) over one SampleStream call; nothing received is
unpickled (the replay wire format is protobuf and raw column bytes).
"""
from __future__ import annotations

import dataclasses
import math
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import tree

from tfrl import errors
from tfrl.offline.input_reader import InputReader
from tfrl.offline.item_layout import repeated_next_obs_mask
from tfrl.policy.sample_batch import SampleBatch

SCHEME = "replay"
DEFAULT_BATCH_SIZE = 200
DEFAULT_TIMEOUT_S = 60.0
# Items requested ahead within one batch's stream; the server splits them into responses.
_MAX_IN_FLIGHT_ITEMS = 1024
_COLUMNAR_ITEM_BYTES = 16 * 1024  # as replay.ReplayDataset
_OPTIONS = ("address", "table", "batch_size", "timeout_s", "token_file", "root_certificates")
_REQUIRED_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS)


@dataclasses.dataclass(frozen=True)
class ReplayInputSpec:
    """A replay table as `input` (see the module docstring for the options)."""

    address: str
    table: str
    batch_size: int = DEFAULT_BATCH_SIZE
    timeout_s: Optional[float] = DEFAULT_TIMEOUT_S
    token_file: Optional[str] = None
    root_certificates: Optional[str] = None

    def url(self) -> str:
        """The `replay://` spelling of this spec's address and table."""
        return f"{SCHEME}://{self.address}/{urllib.parse.quote(self.table)}"


def is_replay_source(spec: Any) -> bool:
    """True when an `input` value (or a mixing key) names a replay table."""
    if isinstance(spec, str):
        return spec.startswith(f"{SCHEME}://")
    return isinstance(spec, Mapping) and list(spec) == [SCHEME] and isinstance(spec[SCHEME], Mapping)


def parse_replay_input(spec: Any) -> ReplayInputSpec:
    """The ReplayInputSpec of a `replay://` URL or a {"replay": {...}} dict.

    Raises:
      InvalidReplayInputError: not one of the two spellings, a missing address or table, an
        unknown option, or an option of the wrong type; the message shows the right spelling.
    """
    spelling = ('"replay://HOST:PORT/TABLE?batch_size=N" or {"replay": {"address": "HOST:PORT", '
                '"table": "TABLE"}}')
    if isinstance(spec, str) and is_replay_source(spec):
        parts = urllib.parse.urlsplit(spec)
        options: Dict[str, Any] = {"address": parts.netloc,
                                   "table": urllib.parse.unquote(parts.path.lstrip("/"))}
        for key, values in urllib.parse.parse_qs(parts.query, keep_blank_values=True).items():
            options[key] = values[-1]
    elif is_replay_source(spec):
        options = dict(spec[SCHEME])
    else:
        raise errors.InvalidReplayInputError(
            f"input {spec!r} does not name a replay table; write {spelling}")
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise errors.InvalidReplayInputError(
            f"input {spec!r}: unknown replay option(s) {unknown}; the options are {list(_OPTIONS)}")
    for key in ("address", "table"):
        if not isinstance(options.get(key), str) or not options[key]:
            raise errors.InvalidReplayInputError(
                f"input {spec!r} names no replay {key}; write {spelling}")
    batch_size = _number(spec, options, "batch_size", DEFAULT_BATCH_SIZE, int)
    if batch_size < 1:
        raise errors.InvalidReplayInputError(
            f"input {spec!r}: batch_size must be >= 1, got {batch_size}")
    timeout_s = options.get("timeout_s", DEFAULT_TIMEOUT_S)
    if timeout_s not in (None, "None", "none", ""):
        timeout_s = _number(spec, options, "timeout_s", DEFAULT_TIMEOUT_S, float)
        if not timeout_s >= 0:
            raise errors.InvalidReplayInputError(
                f"input {spec!r}: timeout_s must be None or >= 0 seconds, got {timeout_s}")
    else:
        timeout_s = None
    for key in ("token_file", "root_certificates"):
        if options.get(key) is not None and not isinstance(options[key], str):
            raise errors.InvalidReplayInputError(
                f"input {spec!r}: {key} must be the path of a file, got {options[key]!r}")
    return ReplayInputSpec(options["address"], options["table"], batch_size, timeout_s,
                           options.get("token_file"), options.get("root_certificates"))


def _number(spec, options: Mapping[str, Any], key: str, default, kind):
    value = options.get(key, default)
    try:
        if isinstance(value, bool):
            raise ValueError
        converted = kind(value)
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        return converted
    except (TypeError, ValueError):
        raise errors.InvalidReplayInputError(
            f"input {spec!r}: {key} must be a number, got {value!r}") from None


def _read_option_file(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise errors.InvalidReplayInputError(
            f"replay input: cannot read the {key} file {path!r} ({exc}); give the path of an "
            "existing, readable file") from None


class ReplayInput(InputReader):
    """SampleBatches of `spec.batch_size` rows sampled from a replay table, forever.

    The constructor connects and checks the table, so a wrong `input` fails when the worker
    starts rather than at its first sample.

    Raises (constructor):
      ReplayInputUnreachableError: no replay server answers at the address (or not over the
        transport given: TLS or not).
      InvalidReplayInputError: the server refused the token, has no such table, or the table's
        items are not SampleBatch rows (no signature naming the columns, `obs` or `actions`
        missing, recurrent sequence items); the message says which and what to do.
    """

    last_was_recorded = True

    def __init__(self, spec: ReplayInputSpec):
        from replay import errors as replay_errors
        from replay.client import Client

        self.spec = spec
        token = None
        if spec.token_file:
            token = _read_option_file(spec.token_file, "token_file").decode().strip()
            if not token:
                raise errors.InvalidReplayInputError(
                    f"replay input: the token_file {spec.token_file!r} is empty")
        certificates = (_read_option_file(spec.root_certificates, "root_certificates")
                        if spec.root_certificates else None)
        self.client = Client(spec.address, token=token, root_certificates=certificates)
        info = self._call(lambda: self.client.server_info(
            timeout=spec.timeout_s if spec.timeout_s is not None else DEFAULT_TIMEOUT_S),
            replay_errors)
        if spec.table not in info:
            raise errors.InvalidReplayInputError(
                f"the replay server at {spec.address} has no table {spec.table!r} (its tables: "
                f"{sorted(info)}); name one of them in `input`")
        self.signature = info[spec.table].signature
        self.item_length = self._check_signature(self.signature)
        self.items_per_batch = math.ceil(spec.batch_size / self.item_length)
        # Small items come columnar (the server sends only the referenced steps, laid out as
        # arrays); large ones (images) keep their compressed chunks on the wire.
        leaves = tree.flatten(self.signature)
        self.columnar = all(None not in s.shape for s in leaves) and sum(
            int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in leaves
        ) < _COLUMNAR_ITEM_BYTES
        self.rows_read = 0

    def _check_signature(self, signature) -> int:
        """The steps per item (1 for step items) of a table whose items are SampleBatch rows."""
        where = f"table {self.spec.table!r} at {self.spec.address}"
        if signature is None:
            raise errors.InvalidReplayInputError(
                f"{where} has no signature, so its item columns have no names to make a "
                "SampleBatch from; read a table created with signature=replay_signature(policy) "
                "(tfrl.rollout.replay_output), as the ones tfrl's trainers and writers fill")
        if not isinstance(signature, Mapping):
            raise errors.InvalidReplayInputError(
                f"{where} holds items of unnamed columns ({type(signature).__name__} signature), "
                "not SampleBatch rows; read a table whose signature is a dict of SampleBatch "
                "columns (obs, actions, ...)")
        missing = [c for c in _REQUIRED_COLUMNS if c not in signature]
        if missing:
            raise errors.InvalidReplayInputError(
                f"{where} holds items with columns {sorted(signature)}, not SampleBatch rows: "
                f"{missing} missing; read a table that tfrl's replay writers filled "
                "(ReplayOutputSpec, a trainer's replay tables)")
        if SampleBatch.SEQ_LENS in signature:
            raise errors.InvalidReplayInputError(
                f"{where} holds zero-padded sequences of a recurrent policy (it has a "
                f"{SampleBatch.SEQ_LENS!r} column), which `input` does not read as rows; record "
                "the experience with `output: DIR` and read the files instead")
        # Step items have scalar rewards/flags; fragment items add a time dimension to them.
        for column in (SampleBatch.REWARDS, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS):
            spec = signature.get(column)
            if spec is not None and not isinstance(spec, (Mapping, list, tuple)):
                return int(spec.shape[0]) if len(spec.shape) == 1 else 1
        return 1

    def _call(self, function, replay_errors):
        try:
            return function()
        except replay_errors.UnavailableError as exc:
            raise errors.ReplayInputUnreachableError(
                f"no replay server answers at {self.spec.address} ({exc}); start it (for a "
                "checkpoint: replay-server --config TABLES.yaml --checkpoint-dir DIR) or fix the "
                "address in `input`; a server that uses TLS needs root_certificates") from None
        except replay_errors.UnauthenticatedError as exc:
            raise errors.InvalidReplayInputError(
                f"the replay server at {self.spec.address} refused the access token ({exc}); give "
                "the file holding its token as token_file") from None
        except replay_errors.DeadlineExceededError as exc:
            raise errors.ReplayInputError(
                f"table {self.spec.table!r} at {self.spec.address} gave no sample within "
                f"timeout_s={self.spec.timeout_s} ({exc}): it is empty or its rate limiter holds "
                "samples back; fill it (or restore it from a checkpoint holding items), or raise "
                "timeout_s") from None
        except replay_errors.NotFoundError as exc:
            raise errors.InvalidReplayInputError(
                f"the replay server at {self.spec.address} has no table {self.spec.table!r} "
                f"({exc}); name one of its tables in `input`") from None

    def _sample_columns(self) -> List[np.ndarray]:
        from replay import column_batch

        timeout_ms = -1 if self.spec.timeout_s is None else int(self.spec.timeout_s * 1000)
        parts: List[List[np.ndarray]] = []
        received = 0
        for packed in self.client.sample_responses(
                self.spec.table, max_in_flight=min(self.items_per_batch, _MAX_IN_FLIGHT_ITEMS),
                timeout_ms=timeout_ms, max_samples=self.items_per_batch,
                columnar=self.columnar):
            num_items = len(packed.response.items.keys)
            if packed.response.HasField("columns"):
                # the server laid each column out: one np.frombuffer per column, no per-item work
                parts.append(column_batch.decode_columns(packed.response.columns, num_items))
            else:
                parts.append(_decode_items(packed))
            received += num_items
        if received < self.items_per_batch:
            raise errors.ReplayInputError(
                f"table {self.spec.table!r} at {self.spec.address}: the sample stream ended "
                f"after {received} of {self.items_per_batch} items (the server is stopping?)")
        # copies: the decoded columns are read-only views into the received messages
        return [np.concatenate(leaf) if len(parts) > 1 else np.array(leaf[0])
                for leaf in zip(*parts)]

    def next(self) -> SampleBatch:
        """The next `batch_size` rows sampled from the table, as a SampleBatch of the table's
        columns (fragment items flattened into consecutive rows, `new_obs` rebuilt where
        the writer dropped repeated observations).

        Raises:
          ReplayInputError: no sample within `timeout_s` (an empty table), or the stream ended
            early; ReplayInputUnreachableError: the server went away.
        """
        from replay import errors as replay_errors

        leaves = self._call(self._sample_columns, replay_errors)
        data = tree.unflatten_as(self.signature, leaves)
        if self.item_length > 1:
            data = {name: tree.map_structure(
                lambda a: a.reshape(-1, *a.shape[2:]), column) for name, column in data.items()}
            data = _restore_next_obs(data, self.item_length)
        batch = SampleBatch(data)
        if batch.count > self.spec.batch_size:
            batch = batch.slice(0, self.spec.batch_size)
        self.rows_read += batch.count
        return batch


def _decode_items(packed) -> List[np.ndarray]:
    """The flat [N, ...] columns of a sample response that carries chunks and items (items
    too large for the columnar layout, or laid out across several chunks), item by item."""
    from replay.codec import decode_sample_items

    cache: dict = {}
    decoded = [item.decode(cache) for item in decode_sample_items(packed)]
    return [np.stack(leaf) for leaf in zip(*decoded)]


def _restore_next_obs(data: Dict[str, Any], item_length: int) -> Dict[str, Any]:
    """`new_obs[t]` = `obs[t + 1]` inside each fragment's episodes (exact whether or not the
    writer dropped those rows, see ReplayOutputSpec.drop_repeated_next_obs)."""
    needed = (SampleBatch.OBS, SampleBatch.NEXT_OBS, SampleBatch.TERMINATEDS,
              SampleBatch.TRUNCATEDS)
    if not all(c in data for c in needed):
        return data
    rows = np.flatnonzero(repeated_next_obs_mask(
        np.asarray(data[SampleBatch.TERMINATEDS]), np.asarray(data[SampleBatch.TRUNCATEDS]),
        item_length))

    def restore(obs, new_obs):
        out = np.array(new_obs, copy=True)
        out[rows] = obs[rows + 1]
        return out

    data = dict(data)
    data[SampleBatch.NEXT_OBS] = tree.map_structure(restore, data[SampleBatch.OBS],
                                                    data[SampleBatch.NEXT_OBS])
    return data


def replay_input(spec: Any) -> ReplayInput:
    """A ReplayInput for an `input` value naming a replay table (either spelling).

    Raises:
      InvalidReplayInputError, ReplayInputUnreachableError: see `parse_replay_input` and
        `ReplayInput`.
    """
    return ReplayInput(parse_replay_input(spec))
