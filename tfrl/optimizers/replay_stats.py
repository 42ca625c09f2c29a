"""What a replay-fed optimizer reports about its tables: how well their chunks compress.

The optimizers that create their tables (AsyncSamplesOptimizer's learner queue, Ape-X's shards)
give each table a `replay.StatisticsExtension`; `table_compression` asks every server holding the
table (one, or every shard) for the extension's chunk counters and sums them. Trainers report the
result under `result["info"]["replay"]` (`compression_ratio` = raw / stored bytes of the chunks
inserted so far; `column_bytes` shows where the stored bytes go, e.g. frames written twice as
`obs` and `new_obs`).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence

logger = logging.getLogger(__name__)

STATISTICS_KIND = "StatisticsExtension"
_COUNTERS = ("chunks_inserted", "chunk_bytes_inserted", "chunk_raw_bytes_inserted",
             "chunk_bytes_live", "chunk_raw_bytes_live")


def column_names(signature: Any) -> List[str]:
    """Names of a table signature's leaves in the order writers store them as chunk columns
    (dm-tree's flatten order: dict keys sorted), nested paths joined by '/'."""
    import tree

    return ["/".join(str(p) for p in path) for path, _ in tree.flatten_with_path(signature)]


def table_compression(clients: Iterable, table: str, signature: Any = None,
                      timeout: float = 5.0) -> Optional[dict]:
    """Chunk counters of `table` summed over the servers of `clients` (replay.Client), with
    `compression_ratio` = chunk_raw_bytes_inserted / chunk_bytes_inserted and, given the table
    `signature`, `column_bytes` / `column_raw_bytes`: {column: stored / decoded bytes}; None when
    no server answers or none has a StatisticsExtension on the table (e.g. an external
    server)."""
    from replay import errors as replay_errors

    totals: Dict[str, Any] = dict.fromkeys(_COUNTERS, 0)
    columns: List[int] = []
    raw_columns: List[int] = []
    found = False
    for client in clients:
        try:
            info = client.server_info(timeout=timeout).get(table)
        except replay_errors.ReplayError as exc:  # a shard restarting: report the others
            logger.debug("replay stats: server_info failed: %s", exc)
            continue
        for extension in (info.extensions if info is not None else ()):
            if extension.get("kind") == STATISTICS_KIND:
                found = True
                for key in _COUNTERS:
                    totals[key] += int(extension.get(key, 0))
                _add(columns, extension.get("chunk_column_bytes_inserted", []))
                _add(raw_columns, extension.get("chunk_column_raw_bytes_inserted", []))
    if not found:
        return None
    stored = totals["chunk_bytes_inserted"]
    totals["compression_ratio"] = totals["chunk_raw_bytes_inserted"] / stored if stored else 1.0
    if signature is not None:
        names = column_names(signature)
        if len(columns) == len(names):
            totals["column_bytes"] = dict(zip(names, columns))
            totals["column_raw_bytes"] = dict(zip(names, raw_columns))
    return totals


def _add(into: List[int], values: Sequence[int]) -> None:
    into.extend([0] * (len(values) - len(into)))
    for i, value in enumerate(values):
        into[i] += int(value)


class CompressionReport:
    """`table_compression` of one table, asked of the servers at most every `interval_s`
    seconds: between asks, the last answer is reported again. Ape-X's iterations are a few
    hundredths of a second, and two `server_info` calls per iteration kept the driver from
    relaunching its workers and took the shards' time. Until the table has a chunk, every call
    asks (an empty answer is not kept).
    """

    def __init__(self, table: str, signature: Any = None, interval_s: float = 5.0):
        self.table = table
        self.signature = signature
        self.interval_s = interval_s
        self._last: Optional[dict] = None
        self._asked_at = float("-inf")

    def __call__(self, clients: Iterable) -> Optional[dict]:
        """The table's counters over the servers of `clients` (see `table_compression`)."""
        now = time.monotonic()
        if self._last is not None and now - self._asked_at < self.interval_s:
            return self._last
        report = table_compression(clients, self.table, self.signature)
        if report is not None and report["chunks_inserted"] > 0:
            self._last, self._asked_at = report, now
        return report
