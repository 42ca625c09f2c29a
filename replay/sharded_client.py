"""Sharded replay: one client over several independent replay servers.

This widens the replay box into N servers without replication (the Reverb
paper's sharding): writers spread experience over the servers and learners merge the
servers' sample streams (`ReplayDataset` given several addresses, see `replay.dataset`).
See docs/architecture.md, "Inside the replay server".

- `ShardedClient(addresses)` keeps one `Client` per server. `insert` goes round robin by item;
  `trajectory_writer` returns a `ShardedTrajectoryWriter`, which writes each episode to one
  server and moves to the next server at `end_episode` (round robin by episode), so items can
  reference every step of their episode; `sample` takes turns over the servers;
  `mutate_priorities` and `reset` go to every server (a key lives on one server, the others
  ignore it).
- A server that fails (UNAVAILABLE, or CANCELLED because it stopped) is marked dead: the failure
  is logged and counted in `ShardFailures`, and writing and sampling go on with the remaining
  servers. Only when every server is dead does a call raise `UnavailableError`. Items that
  were not yet acknowledged by the dead server are lost (counted in `lost_items`), and the
  writer starts a new episode on the next server.

`replay.connect(addresses)` returns a `ShardedClient` for several addresses (a list, or a
comma-separated string) and a `Client` for one; both share the method names used here.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence

from replay import errors
from replay.client import Client

log = logging.getLogger(__name__)

_SERVER_GONE = (errors.UnavailableError, errors.CancelledError)


@dataclasses.dataclass
class ShardFailures:
    """What failed so far: per address the failure count and last error, plus the items lost."""

    failures: Dict[str, int] = dataclasses.field(default_factory=dict)
    last_errors: Dict[str, str] = dataclasses.field(default_factory=dict)
    lost_items: int = 0


class ShardedClient:
    """A client over several replay servers ("host:port" each). The other arguments are those
    of `Client` (token, root_certificates, max_message_bytes), used for every server.

    Raises (constructor):
      InvalidArgumentError: no addresses, or the same address twice.
    """

    def __init__(self, addresses: Sequence[str], **client_kwargs):
        addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        if not addresses:
            raise errors.InvalidArgumentError("ShardedClient needs at least one server address")
        if len(set(addresses)) != len(addresses):
            raise errors.InvalidArgumentError(f"server addresses must be distinct, got {addresses}")
        self.addresses = addresses
        self._client_kwargs = client_kwargs
        self.clients = {a: Client(a, **client_kwargs) for a in addresses}
        self._lock = threading.Lock()
        self._dead: set = set()
        self._next = 0
        self.metrics = ShardFailures()

    def __reduce__(self):  # pickles by addresses, like Client
        return (_rebuild, (self.addresses, self._client_kwargs))

    def __repr__(self) -> str:
        return f"ShardedClient({self.addresses!r})"

    # -- server health ---------------------------------------------------------------------

    @property
    def live_addresses(self) -> List[str]:
        with self._lock:
            return [a for a in self.addresses if a not in self._dead]

    @property
    def dead_addresses(self) -> List[str]:
        with self._lock:
            return [a for a in self.addresses if a in self._dead]

    def mark_dead(self, address: str, error: BaseException, lost_items: int = 0) -> None:
        """Records that `address` failed; later calls skip it."""
        with self._lock:
            self._dead.add(address)
            self.metrics.failures[address] = self.metrics.failures.get(address, 0) + 1
            self.metrics.last_errors[address] = f"{type(error).__name__}: {error}"
            self.metrics.lost_items += lost_items
        log.warning("replay shard %s failed (%s); %d item(s) lost; going on with %s", address, error,
                    lost_items, self.live_addresses)

    def count_lost_items(self, count: int) -> None:
        """Adds `count` items that were written but will never be stored to `metrics.lost_items`."""
        with self._lock:
            self.metrics.lost_items += count

    def next_address(self) -> str:
        """The next live server in round-robin order.

        Raises:
          UnavailableError: every server has failed.
        """
        with self._lock:
            for _ in range(len(self.addresses)):
                address = self.addresses[self._next % len(self.addresses)]
                self._next += 1
                if address not in self._dead:
                    return address
        raise errors.UnavailableError(
            f"every replay server of {self.addresses} has failed ({self.metrics.last_errors}); restart "
            "them or create the client with live addresses")

    # -- writing ---------------------------------------------------------------------------

    def insert(self, data: Any, priorities: Mapping[str, float], timeout: Optional[float] = None) -> str:
        """Inserts one item on the next live server (round robin by item); returns its address.

        Raises:
          UnavailableError: every server has failed; otherwise as `Client.insert`.
        """
        while True:
            address = self.next_address()
            try:
                self.clients[address].insert(data, priorities, timeout=timeout)
                return address
            except _SERVER_GONE as e:
                self.mark_dead(address, e)

    def trajectory_writer(self, num_keep_alive_refs: int, **writer_kwargs) -> "ShardedTrajectoryWriter":
        """A writer that sends each episode to one server, round robin by episode."""
        return ShardedTrajectoryWriter(self, num_keep_alive_refs, **writer_kwargs)

    # -- reading and control ---------------------------------------------------------------

    def sample(self, table: str, num_samples: int = 1, timeout: Optional[float] = None):
        """Yields `num_samples` samples, taking turns over the live servers (one each): each a
        `ReplaySample` of a whole item, its data in the table signature's structure (as
        `Client.sample(..., emit_timesteps=False, unpack_as_table_signature=True)`).

        Raises:
          UnavailableError: every server has failed; otherwise as `Client.sample`.
        """
        produced = 0
        while produced < num_samples:
            address = self.next_address()
            try:
                sample = next(self.clients[address].sample(table, 1, emit_timesteps=False,
                                                           unpack_as_table_signature=True, timeout=timeout))
            except _SERVER_GONE as e:
                self.mark_dead(address, e)
                continue
            produced += 1
            yield sample

    def _on_every_live_server(self, call) -> Dict[str, Any]:
        results = {}
        for address in self.live_addresses:
            try:
                results[address] = call(self.clients[address])
            except _SERVER_GONE as e:
                self.mark_dead(address, e)
        if not results:
            raise errors.UnavailableError(
                f"every replay server of {self.addresses} has failed ({self.metrics.last_errors})")
        return results

    def mutate_priorities(self, table: str, updates: Optional[Mapping[int, float]] = None,
                          deletes: Optional[Sequence[int]] = None, timeout: Optional[float] = None) -> None:
        """Sends the updates and deletes to every live server (each ignores keys it lacks).

        Raises:
          UnavailableError: every server has failed; otherwise as `Client.mutate_priorities`.
        """
        self._on_every_live_server(lambda c: c.mutate_priorities(table, updates, deletes, timeout=timeout))

    def reset(self, table: str, timeout: Optional[float] = None) -> None:
        """Resets `table` on every live server.

        Raises: as `mutate_priorities`.
        """
        self._on_every_live_server(lambda c: c.reset(table, timeout=timeout))

    def server_info(self, timeout: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
        """address -> (table name -> TableInfo) of every live server.

        Raises: UnavailableError when every server has failed.
        """
        return self._on_every_live_server(lambda c: c.server_info(timeout=timeout))

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def _rebuild(addresses, client_kwargs):
    return ShardedClient(addresses, **client_kwargs)


class ShardedTrajectoryWriter:
    """A `TrajectoryWriter` that writes each episode to one live server and moves round robin
    to the next at `end_episode`. When its server fails it marks it dead, counts the items the
    server had not acknowledged as lost, and starts a new episode on the next live server:
    `append` is retried there; an item whose steps were written to the dead server is dropped
    (counted lost) instead of being created.
    """

    def __init__(self, sharded_client: ShardedClient, num_keep_alive_refs: int, **writer_kwargs):
        self.client = sharded_client
        self._num_keep_alive_refs = num_keep_alive_refs
        self._writer_kwargs = writer_kwargs
        self._writer = None
        self.address: Optional[str] = None
        self._last_append_writer = None  # the writer whose references the caller holds
        self.items_per_server: Dict[str, int] = {}
        self._open_next()

    def _open_next(self) -> None:
        address = self.client.next_address()
        self._writer = self.client.clients[address].trajectory_writer(self._num_keep_alive_refs,
                                                                     **self._writer_kwargs)
        self.address = address

    def _fail_over(self, error: BaseException) -> None:
        lost = self._writer.num_unacked_items
        try:
            self._writer.close(flush=False)
        except errors.ReplayError:
            pass
        self.client.mark_dead(self.address, error, lost_items=lost)
        self._open_next()

    def _call(self, method: str, *args, **kwargs):
        while True:
            try:
                return getattr(self._writer, method)(*args, **kwargs)
            except _SERVER_GONE as e:
                self._fail_over(e)
                if method != "append":
                    return None  # what it was flushing or ending died with the server

    @property
    def history(self):
        """The kept-alive steps of the current episode on the current server."""
        return self._writer.history

    def append(self, data: Any):
        """Appends a step on the current server (on the next live one if it failed).

        Raises: UnavailableError when every server failed; otherwise as `TrajectoryWriter.append`.
        """
        refs = self._call("append", data)
        self._last_append_writer = self._writer
        return refs

    def create_item(self, table: str, priority: float, trajectory: Any) -> bool:
        """Creates an item from references of the current server's writer. Returns False (and
        counts the item lost) when those references died with a failed server.

        Raises: UnavailableError when every server failed; otherwise as
          `TrajectoryWriter.create_item`.
        """
        if self._last_append_writer is not self._writer:
            self.client.count_lost_items(1)
            return False
        writer = self._writer
        try:
            writer.create_item(table, priority, trajectory)
        except _SERVER_GONE as e:
            self._fail_over(e)
            self.client.count_lost_items(1)
            return False
        self.items_per_server[self.address] = self.items_per_server.get(self.address, 0) + 1
        return True

    def flush(self, block_until_num_items: int = 0, timeout_ms: Optional[int] = None) -> None:
        """Flushes the current server's writer (a failure there is recorded, not raised).

        Raises: UnavailableError when every server failed; otherwise as `TrajectoryWriter.flush`.
        """
        self._call("flush", block_until_num_items, timeout_ms)

    def end_episode(self, clear_buffers: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Ends the episode on the current server and moves to the next live server.

        Raises: UnavailableError when every server failed; otherwise as
          `TrajectoryWriter.end_episode`.
        """
        self._call("end_episode", clear_buffers, timeout_ms)
        self.close()
        self._open_next()

    def close(self, flush: bool = True) -> None:
        """Flushes (unless `flush` is False) and closes the current server's writer (unlike
        `TrajectoryWriter.close`, flushing by default: the sharded writer counts what it loses).

        Raises: as `TrajectoryWriter.close`, except a failed server, which is recorded.
        """
        if self._writer is None:
            return
        try:
            self._writer.close(flush=flush)
        except _SERVER_GONE as e:
            self.client.mark_dead(self.address, e)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(flush=exc_type is None)
