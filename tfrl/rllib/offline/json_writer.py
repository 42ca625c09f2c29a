"""Classic `ray.rllib.offline.json_writer`: `JsonWriter(path, ioctx=None, max_file_size=...,
compress_columns=...)` over tfrl's JSON-lines writer (tfrl/offline/json_writer.py), whose files
tfrl's offline input reads (`"input": path`).

Differences from classic: columns are written as plain JSON lists whatever `compress_columns`
says (classic packed them with pickle, which tfrl's reader refuses to unpickle), and the file
names are tfrl's (`output-<time>_worker-<i>_<n>.json`).
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from tfrl.offline.json_writer import JsonWriter as _TfrlJsonWriter


class JsonWriter(_TfrlJsonWriter):
    """Writes batches as classic JSON lines into the directory `path` (module docstring).

    Raises:
      InvalidConfigError: the directory cannot be created.
    """

    def __init__(self, path: str, ioctx: Optional[Any] = None,
                 max_file_size: int = 64 * 1024 * 1024,
                 compress_columns: Iterable[str] = ("obs", "new_obs")):
        super().__init__(path, worker_index=int(getattr(ioctx, "worker_index", 0) or 0),
                         max_file_size=max_file_size)
        self.compress_columns = frozenset(compress_columns)  # accepted; written uncompressed


__all__ = ["JsonWriter"]
