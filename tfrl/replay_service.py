"""The trainer's replay service: an embedded replay server, or an external `replay-server`.

Policy optimizers declare the tables they need (`add_table`), then `start()`. Without
`replay_address` in the config, the trainer embeds a `replay.Server` on a free loopback port, so
rollout workers (Ray actors) write experience straight into it and the learner streams it back
through `ReplayDataset`: the bulk data never passes through the driver's Python code. With
`replay_address`, the tables must already exist on that server (declared in its YAML config);
`replay_token_file` and `replay_root_certificates` name the files holding its access token and
the PEM certificate to trust for TLS, and `client_kwargs` carries them to every client the
optimizers and rollout workers open (`Client`, `ReplayDataset`, `ReplayOutputSpec`).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from tfrl import errors

logger = logging.getLogger(__name__)


class ReplayService:
    def __init__(self, config: dict):
        self._external_address: Optional[str] = config.get("replay_address")
        self._tables: Dict[str, object] = {}
        self._server = None
        self._client = None
        self._client_kwargs: Dict[str, Any] = {}
        token_file = config.get("replay_token_file")
        certificates_file = config.get("replay_root_certificates")
        if (token_file or certificates_file) and self.embedded:
            raise errors.InvalidConfigError(
                "replay_token_file and replay_root_certificates are the credentials of an external "
                "replay server; set replay_address too, or drop them to use the embedded server")
        if token_file:
            token = _read_file(token_file, "replay_token_file").decode().strip()
            if not token:
                raise errors.InvalidConfigError(f"replay_token_file {token_file} is empty")
            self._client_kwargs["token"] = token
        if certificates_file:
            self._client_kwargs["root_certificates"] = _read_file(certificates_file,
                                                                  "replay_root_certificates")

    @property
    def embedded(self) -> bool:
        return self._external_address is None

    def add_table(self, table) -> None:
        """Declares a table (a `replay.Table`) the optimizer needs.

        Raises:
          InvalidConfigError: the service already started with another table set, or an external
            server lacks the table (the message shows the YAML entry to add).
        """
        if self._server is not None:
            raise errors.InvalidConfigError(
                f"replay table {table.name!r} declared after the embedded replay server started")
        self._tables[table.name] = table

    def start(self) -> str:
        """Starts the embedded server (or checks the external one) and returns its address."""
        if self.embedded:
            if self._server is None:
                from replay import Server

                self._server = Server(list(self._tables.values()), port=None)
                logger.info("embedded replay server on %s", self.address)
        else:
            info = self.client().server_info()
            missing = [name for name in self._tables if name not in info]
            if missing:
                examples = {name: self._tables[name].config() for name in missing}
                raise errors.InvalidConfigError(
                    f"the replay server at {self._external_address} has no table(s) {missing}; add them "
                    f"to its --config YAML (tables: {examples}) or drop replay_address to use an "
                    "embedded server")
        return self.address

    @property
    def address(self) -> str:
        if self.embedded:
            if self._server is None:
                raise errors.TfrlError("the embedded replay server is not started yet")
            return f"127.0.0.1:{self._server.port}"
        return self._external_address

    @property
    def client_kwargs(self) -> Dict[str, Any]:
        """The credentials every client of the replay server needs (token, root_certificates),
        as keyword arguments of `Client` and `ReplayDataset`; empty for the embedded server."""
        return dict(self._client_kwargs)

    def client(self):
        if self._client is None:
            from replay import Client

            self._client = Client(self.address, **self._client_kwargs)
        return self._client

    def checkpoint(self) -> str:
        """Checkpoints the replay server's tables; returns the checkpoint path."""
        return self.client().checkpoint()

    def save_checkpoint(self, directory: Optional[str]) -> Optional[str]:
        """Writes the tables (items, priorities, times sampled, counters) and returns the
        checkpoint's path: an embedded server's under `directory` (None when the embedded server
        never started: the optimizer uses no tables); an external server writes its own
        checkpoint (into its --checkpoint-dir, `directory` is unused).

        Raises:
          replay.errors.FailedPreconditionError: an external server without a checkpoint dir.
        """
        if not self.embedded:
            return self.checkpoint()
        if self._server is None:
            return None
        from replay.checkpoint import Checkpointer

        return Checkpointer(directory, keep=1).save(list(self._started_server().tables.values()))

    def load_checkpoint(self, directory: str) -> None:
        """Reloads the embedded server's tables from a `save_checkpoint` directory, in place:
        open writers and sample streams keep working and see the restored items.

        Raises:
          CheckpointError: no complete checkpoint there, an unreadable one, a table this server
            does not serve, or an external server (it loads its own checkpoints when it starts).
        """
        from replay import errors as replay_errors
        from replay.checkpoint import Checkpointer

        if not self.embedded:
            raise errors.CheckpointError(
                "replay tables can only be reloaded into the embedded replay server; an external "
                "replay-server loads its latest checkpoint from --checkpoint-dir when it starts")
        server = self._started_server()
        latest = Checkpointer(directory).latest()
        if latest is None:
            raise errors.CheckpointError(f"no complete replay checkpoint under {directory!r}")
        try:
            loaded = Checkpointer.load(latest)
        except replay_errors.ReplayError as exc:
            raise errors.CheckpointError(f"cannot read replay checkpoint {latest!r}: {exc}") from exc
        unknown = sorted(t.name for t in loaded if t.name not in server.tables)
        if unknown:
            raise errors.CheckpointError(
                f"replay checkpoint {latest!r} holds tables {unknown} that this trainer does not "
                f"use (it has {sorted(server.tables)}); restore it into the same algorithm")
        for table in loaded:
            _, items, counters = table.checkpoint()
            try:
                server.tables[table.name].load_checkpoint(items, counters)
            except replay_errors.ReplayError as exc:
                raise errors.CheckpointError(
                    f"replay checkpoint {latest!r} does not fit table {table.name!r}: {exc}") from exc

    def _started_server(self):
        if self._server is None:
            raise errors.TfrlError("the embedded replay server is not started yet")
        return self._server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def _read_file(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.InvalidConfigError(f"config key {key}: cannot read {path}: {e}") from e
