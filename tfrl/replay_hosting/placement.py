"""Where a trainer's replay servers run, which interface they listen on, and how clients reach them.

A trainer's replay servers (`ReplayService`'s one server, `ReplayShards`' N) run either in the
driver (the default: embedded, on loopback) or, with `replay_resources`, as Ray actors that Ray
places on a node offering those resources (e.g. `{"replay": 1}` on a memory-rich host). A server
that clients on other nodes must reach listens on its node's address only when told
(`replay_bind_address`), and then the address every rollout worker and learner is given is the
routable address of the node that hosts it (`ray.util.get_node_ip_address()` there), never
loopback. `replay_token_file` makes the servers demand an access token, and
`replay_tls_certificate_file` / `replay_tls_private_key_file` make them serve TLS; clients trust
`replay_root_certificates` (default: the server's own certificate, for a self-signed one).

`ReplayHosting.from_config` reads and checks these keys; `ReplayServerActor` is the Ray actor
body of one server.
"""
from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any, Dict, List, Optional, Tuple

from tfrl import errors
from tfrl.config.defaults import COMMON_CONFIG
from tfrl.runtime import check_feasible, check_resources

LOOPBACK = "127.0.0.1"
# replay_bind_address value meaning "the address of the node that hosts the server"
NODE_ADDRESS = "node"


@dataclasses.dataclass(frozen=True)
class ReplayHosting:
    """The checked replay placement keys of a trainer's config (module docstring).

    bind_address: None (loopback), "node" (the hosting node's routable address), "0.0.0.0"
      (every interface, advertised as the node's address) or one IP address of the host.
    resources: Ray resources each server actor reserves; None runs the server in the driver.
    token: the access token the servers demand (None: none).
    tls_certificate, tls_private_key: PEM bytes the servers serve TLS with (None: plaintext).
    root_certificates: PEM bytes clients trust (None: plaintext).
    start_timeout: seconds a server actor may take to start (`replay_start_timeout_s`).
    """

    bind_address: Optional[str] = None
    resources: Optional[Dict[str, float]] = None
    token: Optional[str] = None
    tls_certificate: Optional[bytes] = None
    tls_private_key: Optional[bytes] = None
    root_certificates: Optional[bytes] = None
    start_timeout: float = COMMON_CONFIG["replay_start_timeout_s"]

    @classmethod
    def from_config(cls, config: dict) -> "ReplayHosting":
        """The hosting of the servers a trainer starts itself.

        Raises:
          InvalidConfigError: replay_bind_address not None, "node", "0.0.0.0" or an IP address;
            replay_resources not a dict of resource name -> non-negative number, or set while
            the servers stay on loopback (other nodes could not reach them); only one of the TLS
            certificate and key files; replay_root_certificates without them (the server would
            serve plaintext); an unreadable or empty credentials file.
        """
        bind = config.get("replay_bind_address")
        if bind is not None:
            if not isinstance(bind, str) or not _is_bind_address(bind):
                raise errors.InvalidConfigError(
                    f"replay_bind_address must be None (loopback), {NODE_ADDRESS!r} (the hosting "
                    f"node's routable address), '0.0.0.0' or an IP address of the host, got {bind!r}")
            if bind in (LOOPBACK, "localhost"):
                bind = None
        resources = config.get("replay_resources")
        if resources is not None:
            resources = check_resources("replay_resources", resources)
            if bind is None:
                raise errors.InvalidConfigError(
                    f"replay_resources={resources} lets Ray place the replay server on another "
                    "node, whose loopback the rollout workers and the learner cannot reach; set "
                    f"replay_bind_address={NODE_ADDRESS!r} (with replay_token_file and TLS when "
                    "the network is not trusted)")
        cert_file = config.get("replay_tls_certificate_file")
        key_file = config.get("replay_tls_private_key_file")
        if (cert_file is None) != (key_file is None):
            raise errors.InvalidConfigError(
                "replay_tls_certificate_file and replay_tls_private_key_file go together (the "
                "server's PEM certificate and its private key); set both or neither")
        token = None
        if config.get("replay_token_file"):
            token = read_credentials(config["replay_token_file"], "replay_token_file").decode().strip()
            if not token:
                raise errors.InvalidConfigError(
                    f"replay_token_file {config['replay_token_file']} is empty")
        certificate = read_credentials(cert_file, "replay_tls_certificate_file") if cert_file else None
        private_key = read_credentials(key_file, "replay_tls_private_key_file") if key_file else None
        roots = config.get("replay_root_certificates")
        if roots and certificate is None:
            raise errors.InvalidConfigError(
                "replay_root_certificates is the certificate clients trust for TLS, but the replay "
                "server the trainer starts serves plaintext; set replay_tls_certificate_file and "
                "replay_tls_private_key_file to serve TLS, or set replay_address for an external "
                "TLS server")
        root_certificates = (read_credentials(roots, "replay_root_certificates") if roots
                             else certificate)
        start_timeout = config.get("replay_start_timeout_s", cls.start_timeout)
        if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float)) \
                or not start_timeout > 0:
            raise errors.InvalidConfigError(
                f"replay_start_timeout_s must be a positive number of seconds, got {start_timeout!r}")
        return cls(bind, resources, token, certificate, private_key, root_certificates,
                   float(start_timeout))

    @property
    def in_actors(self) -> bool:
        """True: the servers run as Ray actors placed by `resources`."""
        return self.resources is not None

    @property
    def client_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments of `Client` / `ReplayDataset` for these servers."""
        kwargs: Dict[str, Any] = {}
        if self.token is not None:
            kwargs["token"] = self.token
        if self.root_certificates is not None:
            kwargs["root_certificates"] = self.root_certificates
        return kwargs

    def server_kwargs(self) -> Dict[str, Any]:
        """Keyword arguments of `replay.Server` (token and TLS)."""
        return {"token": self.token, "tls_certificate": self.tls_certificate,
                "tls_private_key": self.tls_private_key}

    def start_embedded(self, tables: List[Any]) -> Tuple[Any, str]:
        """Starts a `replay.Server` in this process; returns (server, address clients use).
        The trainer's driver makes much cyclic garbage (TensorFlow's), so the server leaves
        its collector alone (`replay.gc_freeze`)."""
        from replay import Server

        listen, advertised = listen_and_advertised(self.bind_address)
        server = Server(tables, port=None, host=listen, freeze_gc=False, **self.server_kwargs())
        return server, f"{advertised}:{server.port}"

    def start_actors(self, num_servers: int, table_configs: List[dict],
                     checkpoint_paths: Optional[List[Optional[str]]] = None,
                     ) -> Tuple[List[Any], List[str]]:
        """Starts `num_servers` server actors placed by `resources`; returns (actors, addresses).
        `checkpoint_paths[i]`: a directory server i checkpoints into and, at start, restores the
        latest complete checkpoint from (None: no checkpoints).

        Raises:
          InvalidConfigError: no node of the cluster offers `resources` (Ray would wait for
            one forever); the message lists what the nodes offer.
          ReplayStartTimeoutError: the servers did not all start within `start_timeout` seconds
            (the nodes that offer `resources` are taken or dying); none is left running.
          ray.exceptions.ActorDiedError: a server's actor died while starting.
        """
        import ray

        check_feasible("replay_resources", self.resources)
        # num_cpus=0: a server is I/O bound and must not take a rollout worker's CPU slot.
        actor_cls = ray.remote(num_cpus=0, resources=self.resources or None,
                               max_restarts=0)(ReplayServerActor)
        paths = list(checkpoint_paths or [None] * num_servers)
        actors = [actor_cls.remote(table_configs, self.bind_address, self.server_kwargs(), path)
                  for path in paths[:num_servers]]
        try:
            addresses = ray.get([actor.address.remote() for actor in actors],
                                timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            for actor in actors:
                ray.kill(actor)
            raise errors.ReplayStartTimeoutError(
                f"{num_servers} replay server actor(s) with resources {self.resources} did not start "
                f"within replay_start_timeout_s={self.start_timeout:g} s: the nodes that offer "
                "these resources are taken by other servers or are not alive; add a node that "
                "offers them, or raise replay_start_timeout_s when nodes are slow to start "
                "actors") from None
        except BaseException:
            for actor in actors:
                ray.kill(actor)
            raise
        return actors, addresses


class ReplayServerActor:
    """A Ray actor body: one `replay.Server` built from table configs (`Table.config()` dicts, so
    nothing but plain data crosses to the actor), listening per `bind_address` on a free port;
    with `checkpoint_path` it restores the latest checkpoint there and `Client.checkpoint()`
    writes new ones. The actor's process is the server's own, so the server runs the collector
    policy of `replay.gc_freeze`, as the `replay-server` command does."""

    def __init__(self, table_configs: List[dict], bind_address: Optional[str] = None,
                 server_kwargs: Optional[dict] = None, checkpoint_path: Optional[str] = None):
        from replay import Server
        from replay.checkpoint import Checkpointer
        from replay.table import Table

        listen, self._advertised = listen_and_advertised(bind_address)
        checkpointer = Checkpointer(checkpoint_path) if checkpoint_path else None
        self._server = Server([Table.from_config(c) for c in table_configs], port=None,
                              host=listen, checkpointer=checkpointer, freeze_gc=True,
                              **(server_kwargs or {}))

    def address(self) -> str:
        """host:port clients on any node use (loopback for a loopback server)."""
        return f"{self._advertised}:{self._server.port}"

    def node_id(self) -> str:
        """The Ray node this server runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def stop(self) -> None:
        self._server.stop()


def listen_and_advertised(bind_address: Optional[str]) -> Tuple[str, str]:
    """(interface to listen on, host clients use) of a server started in this process."""
    if bind_address is None:
        return LOOPBACK, LOOPBACK
    if bind_address in (NODE_ADDRESS, "0.0.0.0"):
        node = node_address()
        return (node if bind_address == NODE_ADDRESS else "0.0.0.0"), node
    return bind_address, bind_address


def node_address() -> str:
    """The routable address of the Ray node this process runs on (the machine's outbound address
    when Ray is not running here)."""
    import ray

    return ray.util.get_node_ip_address()


def read_credentials(path: str, key: str) -> bytes:
    """The bytes of a credentials file named by config key `key`.

    Raises:
      InvalidConfigError: the file cannot be read.
    """
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.InvalidConfigError(f"config key {key}: cannot read {path}: {e}") from e


def _is_bind_address(value: str) -> bool:
    if value in (NODE_ADDRESS, "localhost"):
        return True
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True
