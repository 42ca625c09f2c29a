"""Reverb's checkpointer wrappers (`replay.reverb`) over `replay.checkpoint.Checkpointer`.

Checkpoints are the service's own checksummed format, not Reverb's RecordIO files: a server
restores only checkpoints written by this service.
"""
from __future__ import annotations

import tempfile
from typing import Optional

from replay import errors
from replay.checkpoint import Checkpointer


class CheckpointerBase:
    """What `Server(checkpointer=...)` takes: an object giving the service's `Checkpointer`."""

    def internal_checkpointer(self) -> Checkpointer:
        raise NotImplementedError


class DefaultCheckpointer(CheckpointerBase):
    """Stores checkpoints under `path` (the latest is loaded when a server starts).

    `group` is accepted for Reverb's signature and ignored. `fallback_checkpoint_path` is not
    supported: restore another run's checkpoint by copying it under `path`.

    Raises (constructor):
      InvalidArgumentError: a fallback_checkpoint_path was given.
    """

    def __init__(self, path: str, group: str = "", fallback_checkpoint_path: Optional[str] = None):
        if fallback_checkpoint_path is not None:
            raise errors.InvalidArgumentError(
                "fallback_checkpoint_path is not supported; copy that checkpoint under `path` instead")
        self.path = path
        self.group = group
        self.fallback_checkpoint_path = None
        self._checkpointer: Optional[Checkpointer] = None

    def internal_checkpointer(self) -> Checkpointer:
        if self._checkpointer is None:
            self._checkpointer = Checkpointer(self.path)
        return self._checkpointer


class TempDirCheckpointer(DefaultCheckpointer):
    """Stores checkpoints in a new temporary directory."""

    def __init__(self):
        super().__init__(tempfile.mkdtemp())
