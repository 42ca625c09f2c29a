"""Replay shards: several replay servers holding one logical buffer (Ape-X's replay actors).

Where `ReplayService` gives a trainer one server (embedded in the driver, or external), a
`ReplayShards` gives it N: either N `replay.Server`s the trainer starts, each in a process of
its own (a Ray actor that owns only the server, so its gRPC work never competes with the
driver's learner for the GIL), or N external `replay-server` addresses that already serve the
tables. Rollout workers write each fragment into one shard (rotating over them), the learner
reads from every shard and sends each priority update to the shard its item came from. No data
passes through the driver; the shards are addressed by index, in the order of `addresses`.
See docs/architecture.md, "Data path".
"""
from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any, Dict, List, Optional, Sequence

from tfrl import errors
from tfrl.replay_hosting.datasets import declared_table_dataset
from tfrl.replay_hosting.placement import ReplayHosting

logger = logging.getLogger(__name__)

# `alive` first tries a plain TCP connection for at most this long: a refusal settles it.
_REFUSAL_CHECK_SECONDS = 1.0
# A restarted shard whose new actor died with its node is started again, this often.
_RESTART_ATTEMPTS = 3
_RESTART_RETRY_SECONDS = 2.0


class ReplayShards:
    """N replay servers serving the same tables.

    Args:
      num_shards: how many servers to start (ignored when `addresses` is given).
      addresses: "host:port" of external servers already serving the tables (one per shard).
      client_kwargs: credentials of the servers (token, root_certificates).
      hosting: where the servers the trainer starts run and listen (`ReplayHosting`: placed by
        replay_resources, bound per replay_bind_address, with its token and TLS); None: actors
        anywhere, on loopback.
      checkpoint_dir: servers the trainer starts checkpoint shard i into `checkpoint_dir/shard_i`
        (`checkpoint()`), and a shard `restart`ed after its loss comes back from there. On a
        cluster it must be a path every replay node reaches (shared storage).

    Raises (constructor):
      InvalidConfigError: num_shards below 1, an empty address list, or a checkpoint_dir with
        external servers (they checkpoint where their own --checkpoint-dir says).
    """

    def __init__(self, num_shards: int = 1, addresses: Optional[Sequence[str]] = None,
                 client_kwargs: Optional[Dict[str, Any]] = None,
                 hosting: Optional[ReplayHosting] = None, checkpoint_dir: Optional[str] = None):
        if checkpoint_dir and addresses is not None:
            raise errors.InvalidConfigError(
                "replay_shard_checkpoint_dir makes the shards the trainer starts checkpoint and "
                "come back after a loss; the servers at replay_shard_addresses are yours (start "
                "them with replay-server --checkpoint-dir); drop one of the two")
        self.checkpoint_dir = checkpoint_dir or None
        if addresses is not None:
            addresses = [str(a) for a in addresses]
            if not addresses:
                raise errors.InvalidConfigError(
                    "replay_shard_addresses is empty; give one host:port per replay shard, or "
                    "leave it None to let the trainer start num_replay_shards servers")
        elif int(num_shards) < 1:
            raise errors.InvalidConfigError(
                f"num_replay_shards must be >= 1, got {num_shards}")
        self._external = addresses
        self.num_shards = len(addresses) if addresses is not None else int(num_shards)
        self.hosting = hosting or ReplayHosting()
        self.client_kwargs = dict(client_kwargs or {})
        self._tables: Dict[str, Any] = {}
        self._actors: List[Any] = []
        self.addresses: List[str] = []
        self._clients: List[Any] = []

    def add_table(self, table) -> None:
        """Declares a table (a `replay.Table`) every shard serves; each shard gets its own copy.

        Raises:
          InvalidConfigError: the shards already started.
        """
        if self.addresses:
            raise errors.InvalidConfigError(
                f"replay table {table.name!r} declared after the replay shards started")
        self._tables[table.name] = table

    @property
    def signatures(self) -> Dict[str, Any]:
        return {name: table.signature for name, table in self._tables.items()}

    def start(self) -> List[str]:
        """Starts the shard servers (or checks the external ones); returns their addresses.

        Raises:
          InvalidConfigError: an external shard lacks a declared table, or no node offers
            replay_resources.
          replay.errors.UnavailableError: no server at an external address.
        """
        if self.addresses:
            return self.addresses
        if self._external is not None:
            self.addresses = list(self._external)
            for index in range(self.num_shards):
                info = self.client(index).server_info()
                missing = sorted(set(self._tables) - set(info))
                if missing:
                    raise errors.InvalidConfigError(
                        f"replay shard {index} at {self.addresses[index]} has no table(s) "
                        f"{missing} (it has {sorted(info)}); declare them in its --config YAML, "
                        "or drop replay_shard_addresses to let the trainer start its shards")
            return self.addresses
        configs = [table.config() for table in self._tables.values()]
        self._actors, self.addresses = self.hosting.start_actors(
            self.num_shards, configs, [self._checkpoint_path(i) for i in range(self.num_shards)])
        logger.info("replay shards on %s", self.addresses)
        return self.addresses

    def _checkpoint_path(self, index: int) -> Optional[str]:
        return os.path.join(self.checkpoint_dir, f"shard_{index}") if self.checkpoint_dir else None

    @property
    def restartable(self) -> bool:
        """True: the trainer started the shards with checkpoints, so a lost one can come back."""
        return bool(self._actors) and self.checkpoint_dir is not None

    def checkpoint(self, indices: Sequence[int], timeout: float = 60.0) -> Dict[int, str]:
        """Has each shard in `indices` write a checkpoint; returns {index: path}. A shard that
        fails to is left out (logged): it may be the one being lost."""
        from replay import errors as replay_errors

        paths = {}
        for index in indices:
            try:
                paths[index] = self.client(index).checkpoint(timeout=timeout)
            except replay_errors.ReplayError as exc:
                logger.warning("replay shard %d at %s did not checkpoint: %s", index,
                               self.addresses[index], exc)
        return paths

    def alive(self, index: int, timeout: float = 5.0) -> bool:
        """True when shard `index` answers a ServerInfo within `timeout` seconds; False at once
        when its host refuses the connection (nothing listens there any more: the server's
        process is gone), where `server_info` would retry for all of `timeout`."""
        from replay import errors as replay_errors

        if _connection_refused(self.addresses[index], min(timeout, _REFUSAL_CHECK_SECONDS)):
            return False
        try:
            self.client(index).server_info(timeout=timeout)
            return True
        except replay_errors.ReplayError:
            return False

    def restart(self, index: int) -> str:
        """Starts a new server for lost shard `index` (placed by replay_resources, on any node
        that has them) from the shard's latest checkpoint; returns its address.

        Raises:
          InvalidConfigError: the shards are external or were started without checkpoints.
          ray.exceptions.ActorDiedError: the new server's actor died in each of
            `_RESTART_ATTEMPTS` starts (a node dying is noticed late; the next start avoids it).
        """
        import ray

        if not self.restartable:
            raise errors.InvalidConfigError(
                "only shards the trainer started with replay_shard_checkpoint_dir can be restarted")
        try:
            ray.kill(self._actors[index])
        except Exception:  # noqa: BLE001 - the actor died with its node
            pass
        old_client = self._clients[index] if index < len(self._clients) else None
        if old_client is not None:
            self._clients[index] = None
            try:
                old_client.close()
            except Exception:  # noqa: BLE001 - a client of a server that is gone
                pass
        configs = [table.config() for table in self._tables.values()]
        for attempt in range(_RESTART_ATTEMPTS):
            try:
                actors, addresses = self.hosting.start_actors(1, configs,
                                                              [self._checkpoint_path(index)])
                break
            except ray.exceptions.ActorDiedError:
                # Placed on a node that was dying too, before Ray marked it dead: once it has,
                # the next try lands elsewhere.
                if attempt == _RESTART_ATTEMPTS - 1:
                    raise
                time.sleep(_RESTART_RETRY_SECONDS)
        self._actors[index], self.addresses[index] = actors[0], addresses[0]
        logger.warning("replay shard %d restarted on %s from %s", index, addresses[0],
                       self._checkpoint_path(index))
        return addresses[0]

    def client(self, index: int):
        """The `replay.Client` of shard `index` (one per shard, reused)."""
        from replay import Client

        while len(self._clients) <= index:
            self._clients.append(None)
        if self._clients[index] is None:
            self._clients[index] = Client(self.addresses[index], **self.client_kwargs)
        return self._clients[index]

    def dataset(self, index: int, table: str, max_in_flight_samples_per_worker: int, **kwargs):
        """A `replay.ReplayDataset` of `table` on shard `index`, typed by its declared
        signature. The caller closes it.

        Raises:
          InvalidConfigError: `table` was not declared with a signature.
        """
        return declared_table_dataset(
            self.addresses[index], table, self._tables, "the replay shards",
            max_in_flight_samples_per_worker, self.client_kwargs, **kwargs)

    def stop(self) -> None:
        """Closes the clients and stops the servers the trainer started."""
        for client in self._clients:
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001 - closing a client of a server that is gone
                    pass
        self._clients = []
        if self._actors:
            import ray

            for actor in self._actors:
                try:
                    ray.get(actor.stop.remote(), timeout=10)
                except Exception:  # noqa: BLE001 - the actor may already be gone
                    pass
                ray.kill(actor)
            self._actors = []


def _connection_refused(address: str, timeout: float) -> bool:
    """Whether the host of "host:port" refuses a TCP connection to the port. Any other outcome
    (a connection, a timeout, an unreachable host, a name that does not resolve) is not a
    refusal: the caller asks the server itself."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False
