"""The writers' client-side check of an item against its table's signature (Reverb's, with its
messages), and the per-client cache of the tables' signatures it reads them from.

Used by `replay.trajectory_writer` (`validate_items`); the server checks items again on insert
(`replay.validation`).
See docs/architecture.md, "Module map" and "Data path".
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import tree

from replay import errors, specs

# Client -> {table: flat signature (a list of (name, shape, dtype)) or None}, as Reverb's client
# caches them; refreshed when a writer meets a table it does not list.
_SIGNATURES: "weakref.WeakKeyDictionary[Any, Dict[str, Any]]" = weakref.WeakKeyDictionary()
_SIGNATURES_LOCK = threading.Lock()


def _table_signature(client, table: str, timeout: Optional[float], stream=None):
    """The flat signature of `table` (None: the table has none), from the client's cache, the
    tables the writer's insert `stream` was told of when it started, or `server_info`.

    Raises:
      InvalidArgumentError: the server has no such table. Errors of `server_info`.
    """
    with _SIGNATURES_LOCK:
        cached = _SIGNATURES.get(client)
    if cached is None or table not in cached:
        infos = None if stream is None else stream.table_infos(timeout)
        if infos is None or table not in infos:  # (an unknown table is looked up afresh)
            from replay.client import Client as NativeClient

            infos = (NativeClient.server_info(client, timeout=timeout) if isinstance(client, NativeClient)
                     else client.server_info(timeout=timeout))
        cached = {name: _flat_signature(info.signature) for name, info in infos.items()}
        with _SIGNATURES_LOCK:
            _SIGNATURES[client] = cached
    if table not in cached:
        raise errors.InvalidArgumentError(
            f"Unable to create item in table '{table}' since the table could not be found.")
    return cached[table]


def _flat_signature(signature) -> Optional[List[Tuple[str, Optional[tuple], np.dtype]]]:
    if signature is None:
        return None
    out = []
    for path, spec in tree.flatten_with_path(signature):
        shape = spec.shape
        if hasattr(shape, "as_list"):  # tf.TensorShape
            shape = None if shape.rank is None else shape.as_list()
        dtype = getattr(spec.dtype, "as_numpy_dtype", spec.dtype)
        name = getattr(spec, "name", None) or "/".join(str(p) for p in path)
        out.append((name, None if shape is None else tuple(shape), np.dtype(dtype)))
    return out


def _spec_text(i: int, name: str, shape, dtype) -> str:
    return f"{i}: Tensor<name: '{name}', dtype: {specs.tf_dtype_name(dtype)}, shape: {specs.tf_shape_text(shape)}>"


def _check_against_signature(table: str, signature, got: List[Tuple[tuple, np.dtype]]) -> None:
    """Reverb's check of an item's columns against a table signature (dtype equal, shape
    compatible), with its messages.

    Raises:
      SignatureMismatchError: a different number of columns, or a column that does not fit.
    """
    def describe():
        want_text = ", ".join(_spec_text(i, n, s, d) for i, (n, s, d) in enumerate(signature))
        got_text = ", ".join(_spec_text(i, str(i), s, d) for i, (s, d) in enumerate(got))
        return want_text, got_text

    if len(signature) != len(got):
        want_text, got_text = describe()
        raise errors.SignatureMismatchError(
            f"Unable to create item in table '{table}' since the provided trajectory is inconsistent "
            f"with the table signature. The trajectory has {len(got)} columns but the table signature "
            f"has {len(signature)} columns.\n\nThe table signature is:\n\t{want_text}\n\nThe provided "
            f"trajectory signature was:\n\t{got_text}.\n")
    for i, ((_, want_shape, want_dtype), (shape, dtype)) in enumerate(zip(signature, got)):
        same_dtype = dtype == want_dtype or (dtype.kind in "SUO" and want_dtype.kind in "SUO")
        compatible = want_shape is None or (len(want_shape) == len(shape) and all(
            w is None or w == s for w, s in zip(want_shape, shape)))
        if not (same_dtype and compatible):
            want_text, got_text = describe()
            raise errors.SignatureMismatchError(
                f"Unable to create item in table '{table}' since the provided trajectory is "
                f"inconsistent with the table signature. The table expects column {i} to be a "
                f"{specs.tf_dtype_name(want_dtype)} {specs.tf_shape_text(want_shape)} tensor but got a "
                f"{specs.tf_dtype_name(dtype)} {specs.tf_shape_text(shape)} tensor.\n\nThe table "
                f"signature is:\n\t{want_text}\n\nThe provided trajectory signature is:\n\t{got_text}.\n")
