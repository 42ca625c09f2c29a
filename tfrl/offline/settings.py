"""OfflineSettings: the config keys of recorded experience (RLlib's classic offline keys).

Read once per rollout worker (`RolloutWorker`) with `OfflineSettings.from_config(config)`; see
tfrl/config/settings.py for how values are read and checked, and tfrl/offline/__init__.py for where
the readers and writers sit.
"""
from __future__ import annotations

import dataclasses
from typing import List, Literal, Optional, Union

from tfrl.config.settings import Settings, setting


@dataclasses.dataclass(frozen=True)
class OfflineSettings(Settings):
    """Where a worker's experience comes from and where it is recorded (module docstring)."""

    input: Union[str, list, dict] = setting(
        "'sampler' (the envs), a directory, a glob, a list of files, a replay table "
        "('replay://HOST:PORT/TABLE' or {'replay': {'address': ..., 'table': ...}}), or "
        "{source: probability} mixing them (e.g. {'sampler': 0.5, 'DIR': 0.5})")
    input_evaluation: list = setting(
        "off-policy estimators run on batches read from files: 'is', 'wis', 'dr', 'dm'")
    gamma: float = setting("discount of the off-policy estimates (the policies' gamma)",
                           minimum=0, maximum=1)
    postprocess_inputs: bool = setting(
        "run the policy's postprocess_trajectory on every episode piece read from files")
    shuffle_buffer_size: int = setting(
        "recorded batches buffered and handed out in random order (0: in file order)",
        minimum=0)
    input_skip_corrupt: bool = setting(
        "log a truncated or corrupted record file and go on with the next one (False: raise "
        "CorruptRecordError)")
    output: Optional[str] = setting(
        "directory every rollout worker records its sample batches into (None: no recording)")
    output_format: Literal["tfrecord", "json"] = setting(
        "'tfrecord' (tf.train.Example per batch, lz4 columns) or 'json' (RLlib-classic JSON "
        "lines)")
    output_compress_columns: List[str] = setting(
        "columns stored lz4-compressed in TFRecord output (JSON output writes plain lists)")
    output_max_file_size: int = setting(
        "bytes after which a worker starts its next output file", minimum=1)

    @property
    def reads_files(self) -> bool:
        """True when any of the worker's batches may come from recorded experience (files or
        a replay table)."""
        return self.input != "sampler"
