"""Nested state as a JSON file plus an `.npz` file of its arrays: checkpoints without pickle.

Trainer checkpoints (trainer.py) hold nested dicts and lists of numbers, strings, numpy arrays
(weights, optimizer slots, filter statistics) and counters. `write_state(prefix, state)` writes
the structure and the scalars to `<prefix>.json` and every array to `<prefix>.npz`;
`read_state(prefix)` reads them back with `json.load` and `np.load(allow_pickle=False)`, so
reading a checkpoint from an untrusted source never runs code: the worst a crafted file can do is
be refused with a `CheckpointError`.

Encoding (every JSON object is a tagged node, so user data can never be mistaken for a tag):
dict with string keys -> {"dict": {...}}, dict with other keys -> {"items": [[k, v], ...]},
list -> {"list": [...]}, tuple -> {"tuple": [...]}, numpy array -> {"array": "<npz key>"},
numpy scalar -> {"scalar": "<npz key>"}; None, bool, int, float and str are JSON values.
"""
from __future__ import annotations

import json
import os
import zipfile
from typing import Any, Callable, Dict, Optional

import numpy as np

from tfrl.errors import CheckpointError

_NATIVE = (type(None), bool, int, float, str)


def encode_state(state: Any, arrays: Dict[str, np.ndarray],
                 unknown: Optional[Callable[[Any, str], Any]] = None, where: str = "state") -> Any:
    """The JSON-able form of `state`; arrays are added to `arrays` under fresh keys.

    `unknown(value, where)` encodes values of other types (default: raise).

    Raises:
      CheckpointError: a value that is neither data nor handled by `unknown`, or an array of
        Python objects.
    """
    if isinstance(state, _NATIVE):
        return state
    if isinstance(state, (np.ndarray, np.generic)):
        array = np.asarray(state)
        if array.dtype.hasobject:
            raise CheckpointError(f"{where} is an array of Python objects; a checkpoint holds "
                                  "numeric and string arrays only")
        key = f"a{len(arrays)}"
        arrays[key] = array
        return {"array" if isinstance(state, np.ndarray) else "scalar": key}
    if isinstance(state, dict):
        if all(isinstance(k, str) for k in state):
            return {"dict": {k: encode_state(v, arrays, unknown, f"{where}.{k}")
                             for k, v in state.items()}}
        return {"items": [[encode_state(k, arrays, unknown, f"{where} key"),
                           encode_state(v, arrays, unknown, f"{where}[{k!r}]")]
                          for k, v in state.items()]}
    if isinstance(state, (list, tuple)):
        tag = "list" if isinstance(state, list) else "tuple"
        return {tag: [encode_state(v, arrays, unknown, f"{where}[{i}]")
                      for i, v in enumerate(state)]}
    if unknown is not None:
        return unknown(state, where)
    raise CheckpointError(f"{where} is a {type(state).__name__}, which a checkpoint cannot hold; "
                          "state must be dicts, lists, numbers, strings and numpy arrays")


def decode_state(node: Any, arrays: Any, where: str = "state") -> Any:
    """Inverse of `encode_state`; `arrays` maps npz keys to arrays.

    Raises:
      CheckpointError: a node that `encode_state` does not write, or a missing array.
    """
    if isinstance(node, _NATIVE):
        return node
    if isinstance(node, dict) and len(node) == 1:
        (tag, value), = node.items()
        if tag == "dict" and isinstance(value, dict):
            return {k: decode_state(v, arrays, f"{where}.{k}") for k, v in value.items()}
        if tag == "items" and isinstance(value, list):
            return {decode_state(k, arrays, where): decode_state(v, arrays, where)
                    for k, v in value}
        if tag in ("list", "tuple") and isinstance(value, list):
            items = [decode_state(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
            return items if tag == "list" else tuple(items)
        if tag in ("array", "scalar") and isinstance(value, str):
            if value not in arrays:
                raise CheckpointError(f"{where}: array {value!r} is missing from the .npz file")
            array = arrays[value]
            return array if tag == "array" else array[()]
    raise CheckpointError(f"{where}: unexpected entry {str(node)[:80]!r}; the file was not "
                          "written by tfrl")


def write_state(prefix: str, header: dict, state: Any,
                unknown: Optional[Callable[[Any, str], Any]] = None) -> str:
    """Writes `<prefix>.npz` then `<prefix>.json` (header fields plus the encoded state), each
    under a temporary name renamed into place; returns the JSON file's path.

    Raises:
      CheckpointError: state that cannot be stored (see `encode_state`), or an unwritable path.
    """
    arrays: Dict[str, np.ndarray] = {}
    document = dict(header, state=encode_state(state, arrays, unknown))
    try:
        # np.savez appends ".npz" to names without it, so the temporary name keeps the suffix.
        tmp_npz = prefix + ".tmp.npz"
        np.savez(tmp_npz, **arrays)
        os.replace(tmp_npz, prefix + ".npz")
        tmp_json = prefix + ".json.tmp"
        with open(tmp_json, "w", encoding="utf-8") as f:
            json.dump(document, f)
        os.replace(tmp_json, prefix + ".json")
    except OSError as exc:
        raise CheckpointError(f"cannot write a checkpoint at {prefix!r}: {exc}") from exc
    return prefix + ".json"


def read_state(prefix: str) -> dict:
    """Reads what `write_state` wrote: the header fields with "state" decoded.

    Raises:
      CheckpointError: missing, unreadable or malformed files (nothing in them is executed).
    """
    try:
        with open(prefix + ".json", encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"cannot read {prefix + '.json'!r} as a tfrl checkpoint: {exc}") from exc
    if not isinstance(document, dict) or "state" not in document:
        raise CheckpointError(f"{prefix + '.json'!r} is not a tfrl checkpoint (no 'state' entry)")
    try:
        with np.load(prefix + ".npz", allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise CheckpointError(
            f"cannot read the arrays of checkpoint {prefix!r} ({prefix + '.npz'}): {exc}") from exc
    document["state"] = decode_state(document["state"], arrays)
    return document
