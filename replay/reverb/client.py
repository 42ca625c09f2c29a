"""Reverb's `client` module (`replay.reverb`): `Client`, and the legacy `Writer` (the service's own).

`Client` is `replay.client.Client` with Reverb's signatures: `sample` yields per-timestep
samples by default (`emit_timesteps=True`) and flat columns unless `unpack_as_table_signature`,
`server_info` returns Reverb's `TableInfo`s and waits up to `timeout` for a server to come up,
and `writer` / `trajectory_writer` / `structured_writer` return Reverb's writer types.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tree

from replay import client as native_client
from replay import errors
from replay.trajectory_writer import TrajectoryWriter
from replay.writer import Writer
from replay.replay_sample import ReplaySample

# Reverb's legacy writer closes chunks of min(10, max_sequence_length) steps by default.
_DEFAULT_LEGACY_CHUNK_LENGTH = 10
_RETRY_INTERVAL_SECONDS = 0.05


class Client(native_client.Client):
    """A client of a replay server with Reverb's API (`Client(server_address)`).

    The keyword arguments of `replay.Client` (token, root_certificates, max_message_bytes)
    are accepted too.
    """

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, server_address: str, **kwargs):
        super().__init__(server_address, **kwargs)
        self._server_address = server_address
        self._reverb_signatures: Dict[str, Any] = {}

    def __reduce__(self):
        return (_rebuild_client, (self.address, self._token, self._root_certificates, self.max_message_bytes))

    def __repr__(self) -> str:
        return f"Client, server_address={self.address}"

    @property
    def server_address(self) -> str:
        return self.address

    # -- writing ------------------------------------------------------------------------

    def insert(self, data: Any, priorities: Dict[str, float], timeout: Optional[float] = None) -> None:
        """Inserts one step as an item into each table of `priorities`; as in Reverb, the item's
        columns have a time dimension of one step.

        Raises:
          InvalidArgumentError (a ValueError): no tables or a bad priority; as `replay.Client.insert`.
        """
        self._insert_step(data, priorities, timeout, time_dimension=True)

    def writer(self, max_sequence_length: int, delta_encoded: bool = False,
               chunk_length: Optional[int] = None, max_in_flight_items: Optional[int] = 25) -> Writer:
        """Reverb's legacy writer.

        Raises:
          InvalidArgumentError (a ValueError): max_sequence_length < 1, chunk_length < 1 or
          greater than max_sequence_length, max_in_flight_items < 1.
        """
        if max_sequence_length < 1:
            raise errors.InvalidArgumentError(
                f"max_sequence_length ({max_sequence_length}) must be a positive integer")
        if chunk_length is None:
            chunk_length = min(_DEFAULT_LEGACY_CHUNK_LENGTH, max_sequence_length)
        if chunk_length < 1 or chunk_length > max_sequence_length:
            raise errors.InvalidArgumentError(
                f"chunk_length ({chunk_length}) must be a positive integer <= max_sequence_length "
                f"({max_sequence_length})")
        if max_in_flight_items is None:
            max_in_flight_items = 1_000_000
        if max_in_flight_items < 1:
            raise errors.InvalidArgumentError(
                f"max_in_flight_items ({max_in_flight_items}) must be a positive integer")
        return Writer(self, max_sequence_length, chunk_length=chunk_length, delta_encoded=delta_encoded,
                      max_in_flight_items=max_in_flight_items)

    def trajectory_writer(self, num_keep_alive_refs: int, *, validate_items: bool = True,
                          chunk_length: Optional[int] = None,
                          max_in_flight_items: Optional[int] = None,
                          get_signature_timeout_ms: Optional[int] = None) -> TrajectoryWriter:
        """Reverb's `TrajectoryWriter` (see `replay.trajectory_writer`). With `validate_items`
        `create_item` checks items against their table's signature.

        Raises:
          InvalidArgumentError (a ValueError): num_keep_alive_refs < 1.
        """
        return TrajectoryWriter(self, num_keep_alive_refs, chunk_length=chunk_length,
                                max_in_flight_items=max_in_flight_items, validate_items=validate_items,
                                get_signature_timeout_ms=get_signature_timeout_ms)

    def structured_writer(self, configs: Sequence[Any]):
        """A `StructuredWriter` inserting items as `configs` describe (see `structured_writer`).

        Raises:
          InvalidArgumentError (a ValueError): no configs, or an invalid config.
        """
        from replay.structured_writer import StructuredWriter

        if not configs:
            raise errors.InvalidArgumentError("At least one config must be provided.")
        return StructuredWriter(self, configs)

    # -- sampling -----------------------------------------------------------------------

    def sample(self, table: str, num_samples: int = 1, *, emit_timesteps: bool = True,
               unpack_as_table_signature: bool = False, timeout: Optional[float] = None):
        """Yields `num_samples` samples of `table`.

        With `emit_timesteps` (the default) each sample is a list of `ReplaySample`s, one per
        step of the item (data: the flat list of the step's columns); otherwise one
        `ReplaySample` whose data is the item's flat columns, or the table signature's nest
        with `unpack_as_table_signature`.

        Raises (when iterated):
          ValueError: emit_timesteps with columns of different lengths; NotFoundError: unknown
          table; DeadlineExceededError: nothing to sample within `timeout` seconds.
        """
        if num_samples <= 0:
            raise errors.InvalidArgumentError(f"num_samples must be positive, got {num_samples}")
        signature = self._table_signature(table) if unpack_as_table_signature else None
        timeout_ms = -1 if timeout is None else max(0, int(timeout * 1000))
        call_timeout = None if timeout is None else timeout + native_client.SAMPLE_DEADLINE_ALLOWANCE_SECONDS
        for infos, items, cache in self._sample_responses(table, 1, timeout_ms, num_samples, call_timeout):
            for info, item in zip(infos, items):
                columns = item.decode(cache)
                squeezed = [column[0] for column in item.trajectory]
                yield _as_reverb_sample(info, columns, squeezed, signature, emit_timesteps)

    def update_priorities(self, table: str, updates: Dict[int, float]) -> None:
        """Sets the priorities of items of `table` (unknown keys are ignored)."""
        self.mutate_priorities(table, updates=updates)

    # -- control ------------------------------------------------------------------------

    def server_info(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Table name -> Reverb's `TableInfo`. With a `timeout` (seconds) it waits up to that
        long for the server to answer, also while it is not up yet.

        Raises:
          DeadlineExceededError: no answer within `timeout`; UnavailableError: no server
          (without a timeout).
        """
        from replay.reverb.reverb_types import TableInfo

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                left = None if deadline is None else max(0.001, deadline - time.monotonic())
                infos = super().server_info(timeout=left)
                break
            except (errors.UnavailableError, errors.DeadlineExceededError) as e:
                if deadline is None:
                    raise
                if time.monotonic() + _RETRY_INTERVAL_SECONDS >= deadline:
                    raise errors.DeadlineExceededError(
                        f"ServerInfo call did not complete within provided timeout of {timeout}s "
                        f"(server {self.address}: {e})") from None
                time.sleep(_RETRY_INTERVAL_SECONDS)
        out = {name: TableInfo.from_native(info) for name, info in infos.items()}
        self._reverb_signatures.update({name: info.signature for name, info in out.items()})
        return out

    def _table_signature(self, table: str):
        if table not in self._reverb_signatures:
            self.server_info()
        if table not in self._reverb_signatures:
            raise errors.NotFoundError(
                f'Could not find table "{table}". The following tables exists: '
                f'{", ".join(self._reverb_signatures)}.')
        return self._reverb_signatures[table]


def _rebuild_client(address, token, root_certificates, max_message_bytes) -> Client:
    return Client(address, token=token, root_certificates=root_certificates,
                  max_message_bytes=max_message_bytes)


def _as_reverb_sample(info, columns: List[np.ndarray], squeezed: List[bool], signature, emit_timesteps: bool):
    unflatten = (lambda x: tree.unflatten_as(signature, x)) if signature else (lambda x: x)
    # Reverb stores strings as tf.string and samples them as bytes; str columns go as UTF-8
    columns = [np.char.encode(column, "utf-8") if column.dtype.kind == "U" else column
               for column in columns]
    if not emit_timesteps:
        return ReplaySample(info, unflatten(columns))
    # A squeezed column (a single step without time dimension, as `insert` writes) is one step.
    lengths = {1 if squeeze else len(column) for column, squeeze in zip(columns, squeezed)}
    if len(lengths) != 1:
        raise errors.InvalidArgumentError("Can't split non timestep trajectory into timesteps.")
    steps = []
    for i in range(lengths.pop()):
        step = [np.asarray(column if squeeze else column[i], column.dtype)
                for column, squeeze in zip(columns, squeezed)]
        steps.append(ReplaySample(info, unflatten(step)))
    return steps
