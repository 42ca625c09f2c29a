"""Fuzzing the replay server over raw gRPC: random bytes, truncations, flipped bits and wrong
field values, types, sizes, keys and versions on InsertStream, SampleStream and the unary calls.

Bounded and deterministic (a fixed seed, a few thousand messages). Every call must end with a
named status (never INTERNAL or UNKNOWN); afterwards the server still answers, the items stored
before are unchanged, and everything the server accepted during the fuzzing can be sampled.
"""
import random
import zlib

import grpc
import numpy as np
import pytest

from replay import codec, column_batch, protocol, rate_limiters, selectors
from replay.chunks import Chunk
from replay.items import Item, trajectory_from_chunks
from replay.proto import replay_pb2
from replay.server import Server
from replay.table import Table
from tests.replay.server.conftest import make_tables

pytestmark = pytest.mark.timeout(300)

METADATA = ((protocol.PROTOCOL_METADATA_KEY, str(protocol.PROTOCOL_VERSION)),)
BAD_METADATA = [(), ((protocol.PROTOCOL_METADATA_KEY, "0"),), ((protocol.PROTOCOL_METADATA_KEY, "x" * 300),),
                ((protocol.PROTOCOL_METADATA_KEY, str(protocol.PROTOCOL_VERSION)), (protocol.TOKEN_METADATA_KEY, "t"))]
FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
FUZZ_TABLES = ["uniform", "typed", "queue", "fifo_once", "prioritized", "nope", "", "typed\x00", "ü" * 3]
BAD_DTYPES = [",", "(2,", "(-1,)f4", "(100000000000000,)f8", "S0", "(3,)f4", "O", "f4,i4", "", "V0",
              "<U0", "M8[zz]", "float32" * 10, "<f4", "|b1", "<i8", "|S3"]
INT32, INT64, UINT64 = (-2**31, 2**31 - 1), (-2**63, 2**63 - 1), (0, 2**64 - 1)
REFERENCE = "reference"  # never named by the fuzzer: its items must come out unchanged


def _extreme(rng, bounds):
    low, high = bounds
    return rng.choice([low, high, 0, -1 if low < 0 else 1, 1, 2, 3, 7, 64, 2**20, rng.randint(low, high)])


class Fuzzer:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.next_key = 10_000

    # -- valid messages to start from ---------------------------------------------------------

    def valid_insert(self):
        rng = self.rng
        length = rng.randint(1, 6)
        key = self.next_key = self.next_key + 1
        if rng.random() < 0.3:
            table = "typed"
            columns = [self.nprng.random((length, 3)).astype(np.float32),
                       self.nprng.integers(0, 9, length).astype(np.int64)]
        else:
            table = rng.choice(["uniform", "queue", "fifo_once", "prioritized"])
            columns = [rng.choice([
                lambda: np.zeros((length, 80), np.float32),  # compressed
                lambda: self.nprng.random((length, 3)).astype(np.float32),
                lambda: np.cumsum(self.nprng.integers(0, 3, (length, 70)), axis=0),  # delta, compressed
                lambda: np.array([b"abc"] * length),
                lambda: self.nprng.integers(0, 2, (length, 2, 2)).astype(bool),
            ])() for _ in range(rng.randint(1, 3))]
        chunk = Chunk.from_columns(key, columns, delta_encode=rng.random() < 0.5)
        request = replay_pb2.InsertRequest()
        codec.encode_chunks([chunk], request.chunks)
        items = []
        for i in range(rng.randint(1, 3)):
            offset = rng.randint(0, length - 1)
            steps = 1 if table == "typed" else rng.randint(1, length - offset)
            trajectory = trajectory_from_chunks([chunk], offset, steps)
            if table == "typed":
                trajectory = tuple((True, slices) for _, slices in trajectory)
            items.append((table, Item(key * 10 + i, rng.uniform(0.1, 5), trajectory, {key: chunk})))
        codec.encode_items(items, request.items)
        if rng.random() < 0.3:
            request.release_chunk_keys.append(key)
        return request

    def valid_sample(self):
        rng = self.rng
        return replay_pb2.SampleRequest(
            table=rng.choice(FUZZ_TABLES), num_samples=rng.randint(0, 40),
            rate_limiter_timeout_ms=rng.choice([0, 1, 20]), max_batch_size=rng.randint(0, 64),
            columnar=rng.random() < 0.5)

    def valid_unary(self):
        rng = self.rng
        method = rng.choice(["MutatePriorities", "Reset", "ServerInfo", "Checkpoint"])
        if method == "MutatePriorities":
            keys = [rng.choice([rng.randint(0, 2**64 - 1), self.next_key * 10 + rng.randint(0, 2)])
                    for _ in range(rng.randint(0, 4))]
            return method, replay_pb2.MutatePrioritiesRequest(
                table=rng.choice(FUZZ_TABLES), updates=replay_pb2.PriorityUpdates(
                    keys=keys, priorities=[rng.choice([1.0, 0.0, -1.0, float("nan"), float("inf"), 1e308])
                                           for _ in keys]),
                delete_keys=[rng.randint(0, 2**64 - 1) for _ in range(rng.randint(0, 2))])
        if method == "Reset":
            return method, replay_pb2.ResetRequest(table=rng.choice(FUZZ_TABLES[2:]))
        if method == "ServerInfo":
            return method, replay_pb2.ServerInfoRequest()
        return method, replay_pb2.CheckpointRequest()

    # -- mutations ------------------------------------------------------------------------------

    def mutate_fields(self, message):
        """Sets a random (sub)field of `message` to a wrong but type-correct value."""
        rng = self.rng
        fields = []
        for descriptor, value in message.ListFields():
            if descriptor.message_type is not None and not descriptor.is_repeated:
                fields.extend((value, d) for d in value.DESCRIPTOR.fields)
            fields.append((message, descriptor))
        if not fields:
            return
        owner, descriptor = rng.choice(fields)
        if descriptor.message_type is not None:
            return
        kind = descriptor.type
        if kind == descriptor.TYPE_STRING:
            value = rng.choice(BAD_DTYPES + FUZZ_TABLES)
        elif kind == descriptor.TYPE_BYTES:
            value = bytes(self.nprng.integers(0, 256, rng.choice([0, 1, 4, 9, 300]), dtype=np.uint8))
            if rng.random() < 0.5:  # a valid lz4 size prefix, so the deeper checks run
                value = (rng.choice([0, 4, 12, 320, 2**20])).to_bytes(4, "little") + value
        elif kind == descriptor.TYPE_DOUBLE:
            value = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e308, -0.0])
        elif kind == descriptor.TYPE_BOOL:
            value = rng.random() < 0.5
        elif kind in (descriptor.TYPE_UINT64, descriptor.TYPE_UINT32):
            value = _extreme(rng, UINT64 if kind == descriptor.TYPE_UINT64 else (0, 2**32 - 1))
        elif kind == descriptor.TYPE_INT64:
            value = _extreme(rng, INT64)
        else:
            value = _extreme(rng, INT32)
        container = getattr(owner, descriptor.name)
        if descriptor.is_repeated:
            action = rng.choice(["set", "append", "delete"])
            if action == "set" and len(container):
                container[rng.randrange(len(container))] = value
            elif action == "delete" and len(container):
                del container[rng.randrange(len(container))]
            else:
                container.append(value)
        else:
            setattr(owner, descriptor.name, value)
        if isinstance(message, replay_pb2.InsertRequest) and rng.random() < 0.7:
            batch = message.chunks  # fix the checksums so the checks behind them run
            del batch.crc32[:]
            batch.crc32.extend(zlib.crc32(data) for data in batch.column_data)

    def mutate_bytes(self, data: bytes) -> bytes:
        rng = self.rng
        data = bytearray(data)
        action = rng.choice(["flip", "truncate", "insert", "random"])
        if action == "flip" and data:
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif action == "truncate" and data:
            del data[rng.randrange(len(data)):]
        elif action == "insert":
            at = rng.randint(0, len(data))
            data[at:at] = bytes(self.nprng.integers(0, 256, rng.randint(1, 16), dtype=np.uint8))
        else:
            data = bytearray(self.nprng.integers(0, 256, rng.randint(0, 64), dtype=np.uint8))
        return bytes(data)

    def fuzzed(self, message) -> bytes:
        """`message` mutated at the field level, the byte level, both or neither."""
        rng = self.rng
        if rng.random() < 0.7:
            for _ in range(rng.randint(1, 3)):
                self.mutate_fields(message)
        data = message.SerializeToString()
        if rng.random() < 0.35:
            data = self.mutate_bytes(data)
        return data


def _reference_table():
    return Table(REFERENCE, selectors.Uniform(seed=0), selectors.Fifo(), 10_000, rate_limiters.MinSize(1))


def _store_reference(client):
    """39 two-step items; the last step of item i holds the value i + 1 in every column."""
    with client.writer(2, delta_encoded=True) as writer:
        for i in range(40):
            writer.append([np.full(70, i, np.int64), np.float32(i) + np.zeros(3, np.float32)])
            if i:
                writer.create_item(REFERENCE, 2, 1.0)


def _snapshot(table):
    return {key: [a.copy() for a in table.get(key).decode()] for key in table.keys()}


def test_fuzzed_messages_get_named_statuses_and_change_nothing_stored():
    fuzzer = Fuzzer(seed=20240613)
    with Server(make_tables() + [_reference_table()]) as server:
        client = server.localhost_client()
        _store_reference(client)
        reference = server.tables[REFERENCE]
        before = _snapshot(reference)
        assert len(before) == 39
        channel = grpc.insecure_channel(f"localhost:{server.port}")
        insert = channel.stream_stream(f"/{protocol.SERVICE_NAME}/InsertStream")
        sample = channel.stream_stream(f"/{protocol.SERVICE_NAME}/SampleStream")
        unary = {m: channel.unary_unary(f"/{protocol.SERVICE_NAME}/{m}")
                 for m in ("MutatePriorities", "Reset", "ServerInfo", "Checkpoint")}
        statuses, messages = {}, 0

        def run(call, what, payload):
            try:
                result = call()
                if hasattr(result, "__iter__") and not isinstance(result, bytes):
                    list(result)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
                assert code not in FORBIDDEN, f"{what}: {code} {e.details()} for {payload[:200]!r}"
            statuses[code] = statuses.get(code, 0) + 1

        for round_ in range(600):
            kind = fuzzer.rng.random()
            metadata = METADATA if fuzzer.rng.random() < 0.95 else fuzzer.rng.choice(BAD_METADATA)
            if kind < 0.5:
                requests = [fuzzer.fuzzed(fuzzer.valid_insert()) if fuzzer.rng.random() < 0.8
                            else fuzzer.valid_insert().SerializeToString()
                            for _ in range(fuzzer.rng.randint(1, 5))]
                messages += len(requests)
                run(lambda: insert(iter(requests), metadata=metadata, timeout=10), "InsertStream", requests)
            elif kind < 0.75:
                requests = [fuzzer.fuzzed(fuzzer.valid_sample()) for _ in range(fuzzer.rng.randint(1, 3))]
                messages += len(requests)
                # a valid sample of a table the rate limiter holds back waits for its deadline:
                # a short one keeps those waits from dominating the run
                run(lambda: sample(iter(requests), metadata=metadata, timeout=2), "SampleStream", requests)
            else:
                method, request = fuzzer.valid_unary()
                payload = fuzzer.fuzzed(request)
                messages += 1
                run(lambda: unary[method](payload, metadata=metadata, timeout=10), method, payload)
            if round_ % 150 == 0:
                assert client.server_info(timeout=5)[REFERENCE].current_size == 39
        print(f"fuzz: {messages} messages, statuses {sorted((c.name, n) for c, n in statuses.items())}")
        assert messages >= 1300
        assert grpc.StatusCode.OK in statuses and grpc.StatusCode.INVALID_ARGUMENT in statuses
        assert grpc.StatusCode.DATA_LOSS in statuses  # checks behind the checksums were reached

        # The server still answers, and the items stored before are unchanged...
        assert client.server_info(timeout=5)[REFERENCE].current_size == 39
        assert {k: [a.tolist() for a in v] for k, v in _snapshot(reference).items()} == {
            k: [a.tolist() for a in v] for k, v in before.items()}
        by_value = {int(v[0][-1, 0]): v for v in before.values()}
        for s in client.sample(REFERENCE, 60, timeout=10, emit_timesteps=False, unpack_as_table_signature=True):
            expected = by_value[int(s.data[0][-1, 0])]
            assert all(np.array_equal(a, b) for a, b in zip(s.data, expected))
        # ...and everything accepted during the fuzzing can be sampled, item by item and in bulk.
        for name, table in server.tables.items():
            for key in table.keys():
                table.get(key).decode()
            if table.size and name != "queue" and name != "fifo_once":
                assert len(list(client.sample(name, 50, timeout=10,
                                              emit_timesteps=False, unpack_as_table_signature=True))) == 50
                for packed in client.sample_responses(name, 32, timeout_ms=5000, max_samples=32,
                                                      columnar=True):
                    if packed.response.HasField("columns"):
                        column_batch.decode_columns(packed.response.columns, len(packed.response.probabilities))
        channel.close()
