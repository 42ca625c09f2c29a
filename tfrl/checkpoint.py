"""The trainer checkpoint format: a directory `checkpoint_<iteration>/` holding
`trainer_state.json` (structure, counters, config) and `trainer_state.npz` (weights, optimizer
slots, filter statistics), read with `json.load` and `np.load(allow_pickle=False)`: nothing is
unpickled. With `replay_checkpoint` the embedded replay tables are saved beside them (`replay/`),
or an external server's checkpoint path is recorded. Config values that are not data (functions,
classes, spaces) are left out and listed under `unstored_config_keys`.

Part of the trainer layer: `Trainer.save`, `Trainer.load_checkpoint_state` and Tune's restore
(tune.py) read and write through it.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Optional

import numpy as np

from tfrl import errors
from tfrl.utils.state_files import read_state, write_state

logger = logging.getLogger(__name__)

# A checkpoint directory holds STATE_FILE_PREFIX + ".json" / ".npz" and, with replay_checkpoint,
# the replay tables under REPLAY_CHECKPOINT_DIR.
STATE_FILE_PREFIX = "trainer_state"
STATE_FILE = STATE_FILE_PREFIX + ".json"
LEGACY_STATE_FILE = "trainer_state.pkl"
REPLAY_CHECKPOINT_DIR = "replay"
CHECKPOINT_FORMAT = "tfrl-trainer-checkpoint"
CHECKPOINT_VERSION = 1


def write_checkpoint(path: str, state: dict, replay: Optional[Any] = None) -> str:
    """Writes a trainer's `state` (`Trainer.get_state()`) into the directory `path` and returns
    the path of its state file. With `replay` (the trainer's ReplayService, when
    `replay_checkpoint` is set) the replay tables are saved too: an embedded server's under
    `path/replay/`; an external server writes its own checkpoint and the state records where.

    Raises:
      CheckpointError: the directory cannot be written.
      replay.errors.FailedPreconditionError: an external replay server without --checkpoint-dir.
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise errors.CheckpointError(f"cannot create checkpoint directory {path!r}: {exc}") from exc
    unstored: list = []
    state = dict(state, config=storable(state["config"], "config", unstored))
    header = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
              "unstored_config_keys": unstored}
    if replay is not None:
        if replay.embedded:
            if replay.save_checkpoint(os.path.join(path, REPLAY_CHECKPOINT_DIR)) is not None:
                header["replay_checkpoint"] = {"embedded": True, "path": REPLAY_CHECKPOINT_DIR}
        else:
            header["replay_checkpoint"] = {"embedded": False, "path": replay.save_checkpoint(None)}
    return write_state(os.path.join(path, STATE_FILE_PREFIX), header, state)


def load_checkpoint_state(checkpoint_path: str) -> dict:
    """Reads a checkpoint written by `write_checkpoint` (its directory or its state file)
    without unpickling anything: the trainer state, plus `unstored_config_keys` and, when the
    checkpoint holds embedded replay tables, `replay_checkpoint_path`.

    Raises:
      PickleCheckpointError: a pickle checkpoint of an older version (trainer_state.pkl); it is
        not opened.
      CheckpointError: no checkpoint at that path, or files that are not a tfrl checkpoint.
    """
    directory, name = ((checkpoint_path, STATE_FILE) if os.path.isdir(checkpoint_path)
                       else os.path.split(checkpoint_path))
    if name == LEGACY_STATE_FILE or name.endswith(".pkl") or (
            name == STATE_FILE and not os.path.exists(os.path.join(directory, STATE_FILE))
            and os.path.exists(os.path.join(directory, LEGACY_STATE_FILE))):
        raise errors.PickleCheckpointError(
            f"{os.path.join(directory, LEGACY_STATE_FILE)!r} is a pickle checkpoint of an "
            "older tfrl version; it is refused unopened because loading a pickle can run "
            "code. Checkpoints are now trainer_state.json + trainer_state.npz: retrain and "
            "save with this version (only if you trust the file's source, load it with the "
            "tfrl version that wrote it)")
    if name.endswith(".npz"):
        name = name[:-len(".npz")] + ".json"
    if not name.endswith(".json") or not os.path.exists(os.path.join(directory, name)):
        raise errors.CheckpointError(
            f"no trainer checkpoint at {checkpoint_path!r}; pass a path printed by `save()` or "
            "`tfrl train` (a checkpoint_NNNNNN directory or its trainer_state.json)")
    document = read_state(os.path.join(directory, name[:-len(".json")]))
    if document.get("format") != CHECKPOINT_FORMAT or document.get("version") != CHECKPOINT_VERSION:
        raise errors.CheckpointError(
            f"{os.path.join(directory, name)!r} is format {document.get('format')!r} version "
            f"{document.get('version')!r}, not {CHECKPOINT_FORMAT!r} version "
            f"{CHECKPOINT_VERSION}; restore it with the tfrl version that wrote it")
    state = document["state"]
    if not isinstance(state, dict):
        raise errors.CheckpointError(f"{os.path.join(directory, name)!r} holds no trainer state")
    state["unstored_config_keys"] = list(document.get("unstored_config_keys") or [])
    replay = document.get("replay_checkpoint")
    if isinstance(replay, dict) and replay.get("embedded"):
        state["replay_checkpoint_path"] = os.path.join(directory, str(replay["path"]))
    elif isinstance(replay, dict):
        logger.warning("the checkpoint's replay tables are on an external replay server (%s); "
                       "that server reloads its latest checkpoint when it starts",
                       replay.get("path"))
    return state


def storable(value: Any, where: str, unstored: list) -> Any:
    """`value` with everything that is not plain data (functions, classes, spaces) replaced by
    None; the replaced paths are appended to `unstored`."""
    if isinstance(value, (type(None), bool, int, float, str, np.ndarray, np.generic)):
        return value
    if isinstance(value, dict):
        return {k: storable(v, f"{where}.{k}", unstored) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [storable(v, f"{where}[{i}]", unstored) for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    unstored.append(where)
    return None
