"""Reverb's `checkpointers` module (`replay.reverb`)."""
from typing import Optional

from replay.reverb.platform.checkpointers_lib import CheckpointerBase, DefaultCheckpointer, TempDirCheckpointer


def default_checkpointer(group: Optional[str] = None) -> CheckpointerBase:
    """A checkpointer writing to a new temporary directory."""
    del group
    return TempDirCheckpointer()


__all__ = ["CheckpointerBase", "DefaultCheckpointer", "TempDirCheckpointer", "default_checkpointer"]
