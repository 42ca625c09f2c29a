"""Versioned SavedModel export for a serving system (TF Serving's directory layout).

With `export_every: N`, the trainer writes its policy every N iterations as
`<export_dir>/<iteration>/` (a SavedModel, `Trainer.export_policy_model`), the layout TF
Serving and similar systems watch: they load the highest numeric version and switch when a
newer one appears. Each version is written under a hidden temporary name and renamed when
complete, so a watcher never sees half a model. `export_dir` defaults to `<logdir>/export`.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Optional

from tfrl import errors
from tfrl.config.settings import Settings, setting


@dataclasses.dataclass(frozen=True)
class ExportSettings(Settings):
    """When and where a trainer exports serving versions (module docstring)."""

    export_every: Optional[int] = setting(
        "iterations between versioned SavedModel exports (None: never)", minimum=1)
    export_dir: Optional[str] = setting(
        "base directory of the versions (None: <logdir>/export)")

    def base_dir(self, logdir: Optional[str]) -> Optional[str]:
        """Where versions go, or None without export_every.

        Raises:
          InvalidConfigError: export_every without export_dir or a trainer logdir.
        """
        if not self.export_every:
            return None
        if self.export_dir:
            return os.path.abspath(os.path.expanduser(self.export_dir))
        if logdir is None:
            raise errors.InvalidConfigError(
                "export_every needs a place for the versions: set export_dir, or give the "
                "trainer a logdir (versions then go to <logdir>/export)")
        return os.path.join(os.path.abspath(logdir), "export")


def export_version(trainer, base_dir: str, version: int, policy_id: str = "default_policy") -> str:
    """Writes `trainer`'s policy as `<base_dir>/<version>/` and returns that path; an existing
    version of that number is replaced.

    Raises:
      CheckpointError: the directory cannot be written.
    """
    final = os.path.join(base_dir, str(int(version)))
    partial = os.path.join(base_dir, f".{int(version)}.partial")
    try:
        os.makedirs(base_dir, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)
        trainer.export_policy_model(partial, policy_id)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.replace(partial, final)
    except OSError as exc:
        raise errors.CheckpointError(
            f"cannot write serving version {final!r}: {exc}; make export_dir writable") from exc
    return final
