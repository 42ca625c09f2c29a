"""JSON input files: RLlib-classic JSON lines (JsonWriter's, or classic RLlib's own).

`read_json_file` yields one batch per line. Columns are JSON lists; floats become float32,
integers int64. A classic `dones` column becomes `terminateds` (and `truncateds` all False)
when the line has no `terminateds`. Classic RLlib writes its compressed columns (by default
`obs` and `new_obs`) as base64 strings of pickled arrays; tfrl never unpickles, so such a line
raises `UnsupportedRecordError` (record with `output_compress_columns: []` in RLlib, or
re-record with tfrl). A line that is not valid JSON raises `CorruptRecordError` naming the file
and the line's byte offset.
"""
from __future__ import annotations

import json
from typing import Iterator

import numpy as np

from tfrl import errors
from tfrl.policy.sample_batch import MultiAgentBatch, SampleBatch

DONES = "dones"


def read_json_file(path: str) -> Iterator:
    """Yields the file's batches (SampleBatch or MultiAgentBatch), one per line.

    Raises:
      CorruptRecordError: a line that is not a JSON batch (a truncated last line, damaged
        bytes); the message names `path` and the line's byte offset.
      UnsupportedRecordError: a column packed with pickle by classic RLlib.
      OSError: the file cannot be opened.
    """
    offset = 0
    with open(path, "rb") as f:
        for raw in f:
            line_offset, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                if not isinstance(data, dict):
                    raise ValueError("a line must be a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                raise errors.CorruptRecordError(
                    f"{path}: the line at byte offset {line_offset} is not a JSON batch "
                    f"({exc}). Re-record the file, or set input_skip_corrupt: True to skip "
                    "the rest of it", path=path, offset=line_offset) from None
            yield json_dict_to_batch(data, path, line_offset)


def json_dict_to_batch(data: dict, path: str = "json", offset: int = -1):
    """The batch of one classic JSON line (already parsed).

    Raises:
      CorruptRecordError: an unknown `type` or malformed columns.
      UnsupportedRecordError: a column packed with pickle.
    """
    kind = data.get("type", "SampleBatch")
    if kind == "SampleBatch":
        return _sample_batch({k: v for k, v in data.items() if k != "type"}, path, offset)
    if kind == "MultiAgentBatch":
        policy_batches = data.get("policy_batches")
        if not isinstance(policy_batches, dict):
            raise _corrupt(path, offset, "a MultiAgentBatch line without policy_batches")
        batches = {pid: _sample_batch(columns, path, offset)
                   for pid, columns in policy_batches.items()}
        count = data.get("count", max((b.count for b in batches.values()), default=0))
        return MultiAgentBatch(batches, int(count))
    raise _corrupt(path, offset, f"unknown batch type {kind!r}")


def _sample_batch(columns: dict, path: str, offset: int) -> SampleBatch:
    if not isinstance(columns, dict):
        raise _corrupt(path, offset, "the columns are not a JSON object")
    out = {}
    for name, value in columns.items():
        if isinstance(value, str):
            raise errors.UnsupportedRecordError(
                f"{path}: column {name!r} of the line at byte offset {offset} is packed with "
                "pickle (classic RLlib's compressed columns); tfrl does not unpickle input. "
                "Record with output_compress_columns: [] or re-record with tfrl")
        if value is None:
            continue
        if name == SampleBatch.INFOS:
            out[name] = np.array(value, dtype=object) if isinstance(value, list) else value
            continue
        try:
            array = np.asarray(value)
        except ValueError as exc:
            raise _corrupt(path, offset, f"column {name!r} is ragged ({exc})") from None
        if array.dtype.hasobject or array.dtype.kind in "US":
            raise _corrupt(path, offset, f"column {name!r} is not numeric")
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        out[name] = array
    if SampleBatch.TERMINATEDS not in out and DONES in out:
        out[SampleBatch.TERMINATEDS] = out[DONES].astype(bool)
        out.setdefault(SampleBatch.TRUNCATEDS, np.zeros_like(out[SampleBatch.TERMINATEDS]))
    return SampleBatch(out)


def _corrupt(path: str, offset: int, what: str) -> errors.CorruptRecordError:
    return errors.CorruptRecordError(
        f"{path}: the line at byte offset {offset} is not a batch: {what}. Re-record the "
        "file, or set input_skip_corrupt: True to skip the rest of it", path=path, offset=offset)
