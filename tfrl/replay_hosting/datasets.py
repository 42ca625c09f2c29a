"""Typed datasets of declared tables, part of replay hosting (execution layer): the one way
`ReplayService.dataset` and `ReplayShards.dataset` build a `replay.ReplayDataset` from a table's
declared signature, so a table on an external server needs no signature of its own."""
from __future__ import annotations

from typing import Any, Dict

from tfrl import errors


def declared_table_dataset(address: str, table: str, declared_tables: Dict[str, Any], where: str,
                           max_in_flight_samples_per_worker: int, client_kwargs: Dict[str, Any],
                           **dataset_kwargs):
    """A `replay.ReplayDataset` of `table` at `address`, typed by the signature it was declared
    with in `declared_tables` (name -> declared table); `where` names the declaring host in the
    error. The caller owns (closes) the dataset.

    Raises:
      InvalidConfigError: `table` was not declared with a signature.
    """
    # TensorFlow only when a dataset is asked for: replay hosting starts servers without it.
    import tensorflow as tf
    import tree
    from replay import ReplayDataset

    declared = declared_tables.get(table)
    if declared is None or declared.signature is None:
        raise errors.InvalidConfigError(
            f"replay table {table!r} was not declared with a signature on {where} "
            f"(declared: {sorted(declared_tables)})")
    dtypes = tree.map_structure(lambda spec: tf.as_dtype(spec.dtype), declared.signature)
    shapes = tree.map_structure(lambda spec: tf.TensorShape(list(spec.shape)), declared.signature)
    return ReplayDataset(address, table, dtypes, shapes,
                         max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
                         **client_kwargs, **dataset_kwargs)
