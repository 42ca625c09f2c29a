"""Table declarations in YAML, for the `replay-server` command.

A config file lists tables; each entry is a `Table.from_config` dict (the same fields
`Table.config()` writes), or a shorthand `kind: queue` / `kind: stack` with a name and a
max_size. Example:

    tables:
      - name: replay
        sampler: {kind: Prioritized, priority_exponent: 0.6}
        remover: {kind: Fifo}
        max_size: 100000
        rate_limiter: {kind: SampleToInsertRatio, samples_per_insert: 4, min_size_to_sample: 1000,
                       error_buffer: 400}
        max_times_sampled: 0
        signature: {obs: {shape: [4], dtype: float32}, action: {shape: [], dtype: int64}}
      - {name: rollouts, kind: queue, max_size: 64}
"""
from __future__ import annotations

from typing import Any, List

import yaml

from replay import errors


def tables_from_config(config: Any) -> List:
    """Builds the tables a parsed config declares.

    Raises:
      InvalidArgumentError: no `tables` list, an entry that is not a mapping, duplicate names, or a
        bad table entry (the message names the table and the field).
    """
    from replay.table import Table

    if not isinstance(config, dict) or not isinstance(config.get("tables"), list) or not config["tables"]:
        raise errors.InvalidArgumentError(
            "the replay config must be a mapping with a non-empty 'tables' list; see replay/config.py")
    tables, names = [], set()
    for i, entry in enumerate(config["tables"]):
        if not isinstance(entry, dict):
            raise errors.InvalidArgumentError(f"tables[{i}] must be a mapping, got {entry!r}")
        entry = dict(entry)
        kind = entry.pop("kind", None)
        if kind in ("queue", "stack"):
            unknown = set(entry) - {"name", "max_size", "signature"}
            if unknown or "name" not in entry or "max_size" not in entry:
                raise errors.InvalidArgumentError(
                    f"tables[{i}] ({kind}) takes name, max_size and optionally signature; got {sorted(entry)}")
            factory = Table.queue if kind == "queue" else Table.stack
            config_entry = factory(entry["name"], entry["max_size"]).config()
            if entry.get("signature") is not None:
                config_entry["signature"] = entry["signature"]
            table = Table.from_config(config_entry)
        elif kind is None:
            table = Table.from_config(entry)
        else:
            raise errors.InvalidArgumentError(
                f"tables[{i}]: unknown kind {kind!r}; use 'queue', 'stack' or give a full table entry")
        if table.name in names:
            raise errors.InvalidArgumentError(f"table name {table.name!r} is declared twice")
        names.add(table.name)
        tables.append(table)
    return tables


def load_tables(path: str) -> List:
    """Reads a YAML file and builds its tables.

    Raises:
      InvalidArgumentError: the file cannot be read or parsed, or declares bad tables.
    """
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        raise errors.InvalidArgumentError(f"cannot read the replay config {path}: {e}") from e
    return tables_from_config(config)
