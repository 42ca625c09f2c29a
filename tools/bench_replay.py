"""Replay benchmarks: operations per second, one result line per case.

Modes:
  inprocess  insert and sample throughput of a `replay.table.Table` for each selector at table sizes
             1e3 and 1e6 (no network). The table is first filled through the checkpoint-restore bulk
             path (`Table.from_checkpoint`, reported as bulk_load_items_per_s), then measured at that
             size: every timed insert adds a new item and evicts the oldest (Fifo remover), so the size
             stays constant. Items are built before timing starts (that is the writer's work).

  server-insert, server-sample, server-sample-stream
             the replay server in one process and N client processes on loopback (see
             tools/bench_replay_server.py, the workload of tools/replay_workload.py): one float32
             tensor of random data per item (400 B, 4 kB, 40 kB, 400 kB), chunk length 1, sequence
             length 1, Uniform/Fifo table of 100k items (200 MB of payload at most), MinSize(1);
             one line per case with items/s and MB/s.
             Options: --clients 1 4 --payloads 400 4000 40000 400000 --duration 3

  dataset    (or --dataset) items/s through `ReplayDataset(...).batch(32)` from a server in another
             process (see tools/bench_dataset.py): Uniform/Fifo table, MinSize(1), one float32
             tensor per item. Options: --dataset-payloads 400 40000 --dataset-workers -1
             --duration 10

  validate   what the server's check of each received chunk costs (`codec.decode_chunks` with
             validation: dtype and shape parsing, CRC32, sizes and, for compressed columns, an lz4
             decode into a scratch buffer), per workload of typical columns; one line per workload
             with chunks/s, raw MB/s and the share of the time spent decoding lz4 (best of 5 runs).
             Options: --ops (chunks per workload)

  insert-path
             where the server's CPU time per inserted item goes, without gRPC: the messages a
             writer sends (`append` + `create_item(table, 1.0, history[-1])` of 400 B float32
             steps, the compare_reverb.py workload) are captured from a real writer, then each
             step of the server's insert path is timed on them, in microseconds per item (best of
             5): decode_chunks (with validation), decode_items, validate_items, try_insert_many
             into a full Uniform/Fifo table of 100k items, and the whole per-message step of the
             server (store the chunks, decode, validate, insert), with the garbage collector set as
             the server's `freeze_gc` policy sets it. Options: --ops (items)

  extend     `TrajectoryWriter.extend` against an `append` loop: one writer (num_keep_alive_refs
             100) writes --ops steps of 400 B (float32[100]) in batches of 100 to a server in
             another process (Uniform/Fifo table of 100k items, MinSize(1)); after each batch one
             item references the batch's 100 steps (`create_item(table, 1.0, history[-100:])`),
             and the time includes the final flush. One line per way with steps/s (the items of
             the steps written) of wall time, of the process's CPU time (the writer's and its
             stream's threads; steadier on a loaded machine) and of the writer's thread's CPU
             time (the writer's own work), the server process's CPU microseconds per step
             (least of the 3 runs), and the ratios extend/append (best of 3 runs each,
             alternating). With --profile, prints cProfile's top functions of
             one extend run (the writer's thread CPU time) instead.
             Options: --ops (steps)

Usage: python tools/bench_replay.py [--mode inprocess] [--sizes 1000 1000000] [--ops 20000]
"""
from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sys
import time
from typing import Optional

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from replay.chunks import Chunk
from replay.items import Item, trajectory_from_chunks
from replay.rate_limiters import MinSize
from replay.selectors import Fifo, Lifo, MaxHeap, MinHeap, Prioritized, Uniform
from replay.table import Table

SELECTORS = {
    "Fifo": Fifo,
    "Lifo": Lifo,
    "Uniform": lambda: Uniform(seed=0),
    "Prioritized": lambda: Prioritized(0.8, seed=0),
    "MaxHeap": MaxHeap,
    "MinHeap": MinHeap,
}


def _items(first_key, count, trajectory, chunks, rng):
    priorities = rng.uniform(0.01, 10.0, size=count).tolist()
    return [Item(first_key + i, priorities[i], trajectory, chunks) for i in range(count)]


def bench_inprocess_case(selector_name, size, ops, batch=100):
    """Returns a dict of measurements for one selector at one table size."""
    rng = np.random.default_rng(0)
    chunk = Chunk.from_columns(1, [np.zeros((4, 8), np.float32), np.arange(4, dtype=np.int64)])
    trajectory, chunks = trajectory_from_chunks([chunk], 0, 2), {chunk.key: chunk}
    template = Table("bench", SELECTORS[selector_name](), Fifo(), size, MinSize(1))

    prefill = _items(0, size, trajectory, chunks, rng)
    start = time.perf_counter()
    table = Table.from_checkpoint(template.config(), prefill, {})
    bulk_seconds = time.perf_counter() - start
    del prefill

    new_items = _items(size, ops, trajectory, chunks, rng)
    start = time.perf_counter()
    for item in new_items:
        table.insert_or_assign(item)
    insert_seconds = time.perf_counter() - start

    batches = [_items(size + ops + b * batch, batch, trajectory, chunks, rng) for b in range(max(1, ops // batch))]
    start = time.perf_counter()
    for items in batches:
        table.insert_many(items)
    insert_many_seconds = time.perf_counter() - start

    start = time.perf_counter()
    for _ in range(ops):
        table.sample()
    sample_seconds = time.perf_counter() - start

    assert len(table) == size
    return {
        "bulk_load_items_per_s": size / bulk_seconds,
        "insert_ops_per_s": ops / insert_seconds,
        "insert_many_items_per_s": len(batches) * batch / insert_many_seconds,
        "sample_ops_per_s": ops / sample_seconds,
    }


def run_inprocess(args) -> None:
    for size in args.sizes:
        for name in args.selectors:
            result = bench_inprocess_case(name, size, args.ops)
            fields = " ".join(f"{k}={v:.0f}" for k, v in result.items())
            print(f"inprocess selector={name} size={size} {fields}", flush=True)
            gc.collect()


def _validate_workloads(rng):
    """name -> (columns of one chunk, delta_encode): typical chunks writers send."""
    # 84x84x4 uint8 frames of horizontal bands with a few random sprites (an Atari playfield);
    # and of random 4x4-pixel blocks, whose short overlapping matches are lz4's slow case.
    bands = np.repeat(rng.integers(0, 255, (16, 84, 1, 4), dtype=np.uint8), 84, axis=2)
    for t in range(16):
        for _ in range(6):
            y, x = rng.integers(0, 76, 2)
            bands[t, y:y + 8, x:x + 4] = rng.integers(0, 255, (8, 4, 4), dtype=np.uint8)
    blocks = np.repeat(np.repeat(rng.integers(0, 255, (16, 21, 21, 4), dtype=np.uint8), 4, 1), 4, 2)
    return {
        "atari_bands_16x84x84x4_u8": ([bands, rng.integers(0, 6, 16), rng.random(16, np.float32)], False),
        "atari_blocks_16x84x84x4_u8": ([blocks, rng.integers(0, 6, 16), rng.random(16, np.float32)], False),
        "cartpole_200x4_f32": ([rng.random((200, 4), np.float32), rng.integers(0, 2, 200),
                                np.ones(200, np.float32), np.zeros(200, bool)], False),
        "smooth_counters_256x16_i64_delta": ([np.cumsum(rng.integers(0, 3, (256, 16)), axis=0)], True),
        "constant_obs_64x256_f32": ([np.zeros((64, 256), np.float32)], False),
    }


def _decompress_each(blobs) -> None:
    import lz4.block

    for data in blobs:
        lz4.block.decompress(data)


def _timed(step):
    """A function that runs `step` once and returns the seconds it took."""
    def run() -> float:
        start = time.perf_counter()
        step()
        return time.perf_counter() - start
    return run


def _best_of_5(run, before_each=None) -> float:
    """The fewest seconds of five calls of `run` (which returns its seconds): other processes
    only add time."""
    best = float("inf")
    for _ in range(5):
        if before_each is not None:
            before_each()
        best = min(best, run())
    return best


def run_validate(args) -> None:
    from replay import codec
    from replay.proto import replay_pb2

    rng = np.random.default_rng(0)
    for name, (columns, delta) in _validate_workloads(rng).items():
        chunks = [Chunk.from_columns(i, columns, delta_encode=delta) for i in range(64)]
        batch = replay_pb2.ChunkBatch()
        codec.encode_chunks(chunks, batch)
        raw_bytes = sum(c.columns[i].raw_size(c.length) for c in chunks for i in range(len(c.columns)))
        compressed = [c.data for chunk in chunks for c in chunk.columns if c.compressed]
        rounds = max(1, args.ops // len(chunks) // 5)

        def repeated(work):
            def run():
                for _ in range(rounds):
                    work()
            return _timed(run)

        validate_seconds = _best_of_5(repeated(lambda: codec.decode_chunks(batch, validate=True)))
        build_seconds = _best_of_5(repeated(lambda: codec.decode_chunks(batch, validate=False)))
        lz4_seconds = _best_of_5(repeated(lambda: _decompress_each(compressed)))
        n = rounds * len(chunks)
        print(f"validate workload={name} chunks_per_s={n / validate_seconds:.0f} "
              f"raw_MB_per_s={rounds * raw_bytes / validate_seconds / 1e6:.0f} "
              f"unvalidated_chunks_per_s={n / build_seconds:.0f} "
              f"lz4_share={lz4_seconds / validate_seconds:.2f} "
              f"compressed_columns={len(compressed) // len(chunks)}/{len(columns)}", flush=True)


def _captured_insert_requests(num_items: int):
    """The InsertRequests a writer sends for `num_items` 400 B steps, each an item (parsed, as
    the server receives them)."""
    from replay import framing
    from replay.proto import replay_pb2
    from replay.server import Server

    captured = []
    serialize = framing.serialize_insert_request

    def capture(packed):
        data = serialize(packed)
        captured.append(data)
        return data

    server = Server([Table("bench", Uniform(seed=0), Fifo(), 100_000, MinSize(1))])
    framing.serialize_insert_request = capture
    try:
        writer = server.localhost_client().trajectory_writer(num_keep_alive_refs=1)
        steps = [np.random.default_rng(i).random(100, dtype=np.float32) for i in range(16)]
        for i in range(num_items):
            writer.append(steps[i % 16])
            writer.create_item("bench", 1.0, writer.history[-1])
        writer.close(flush=True)
    finally:
        framing.serialize_insert_request = serialize
        server.stop()
    return [replay_pb2.InsertRequest.FromString(data) for data in captured]


def run_insert_path(args) -> None:
    from replay import codec, gc_freeze
    from replay.server import Server

    num_items = max(args.ops, 250_000)  # enough to fill the 100k table and go on evicting
    requests = _captured_insert_requests(num_items)
    gc.collect()
    gc.set_threshold(*gc_freeze._THRESHOLDS)  # noqa: SLF001 - the collector as the server sets it

    def best_of_5(work) -> float:
        return _best_of_5(work, before_each=gc.freeze)  # the server's policy freezes every second


    chunks = {}

    def decode_chunks():
        for request in requests:
            for chunk in codec.decode_chunks(request.chunks):
                chunks[chunk.key] = chunk

    per_item = 1e6 / num_items
    print(f"insert-path step=decode_chunks us_per_item={best_of_5(_timed(decode_chunks)) * per_item:.2f}",
          flush=True)
    decoded = []

    def decode_items():
        decoded.clear()
        for request in requests:
            decoded.append([item for _, item in codec.decode_items(request.items, chunks.__getitem__)])

    print(f"insert-path step=decode_items us_per_item={best_of_5(_timed(decode_items)) * per_item:.2f}",
          flush=True)

    def validate_items():
        table = Table("bench", Uniform(seed=0), Fifo(), 100_000, MinSize(1))
        for items in decoded:
            table.validate_items(items)

    print(f"insert-path step=validate_items us_per_item={best_of_5(_timed(validate_items)) * per_item:.2f}",
          flush=True)
    half = len(decoded) // 2

    def insert_full():  # the first half fills the table, the second is timed
        table = Table("bench", Uniform(seed=0), Fifo(), 100_000, MinSize(1))
        for items in decoded[:half]:
            table.try_insert_many(items)
        start = time.perf_counter()
        for items in decoded[half:]:
            table.try_insert_many(items)
        return time.perf_counter() - start

    second_half = 1e6 / sum(len(items) for items in decoded[half:])
    print(f"insert-path step=try_insert_many us_per_item={best_of_5(insert_full) * second_half:.2f}", flush=True)
    decoded.clear()
    chunks.clear()

    def server_step():  # the server's step per message (_take_message), then the message's releases
        server = Server([Table("bench", Uniform(seed=0), Fifo(), 100_000, MinSize(1))])
        try:
            servicer, store = server._servicer, server.chunk_store  # noqa: SLF001 - timing its step
            keep_alive, held = {}, 0

            def resolve(key):
                chunk = keep_alive.get(key)
                return chunk if chunk is not None else store.get([key])[0]

            def take(request):
                nonlocal held
                held, pending = servicer._take_message(request, None, list(request.chunks.column_data),  # noqa: SLF001
                                                       keep_alive, held, 1 << 40, resolve)
                assert not pending
                held -= servicer._release(keep_alive, request.release_chunk_keys)  # noqa: SLF001

            for request in requests[:len(requests) // 2]:
                take(request)
            start = time.perf_counter()
            for request in requests[len(requests) // 2:]:
                take(request)
            return time.perf_counter() - start
        finally:
            server.stop()

    timed_items = sum(len(r.items.keys) for r in requests[len(requests) // 2:])
    print(f"insert-path step=server_message us_per_item={best_of_5(server_step) * 1e6 / timed_items:.2f}",
          flush=True)


def _process_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _extend_case(address: str, way: str, batches: list, server_pid: Optional[int] = None) -> tuple:
    """(steps/s of wall time, of the process's CPU time, of the writer's thread's CPU time, and
    the server's CPU microseconds per step when `server_pid` is given) of one writer writing
    `batches` (each [100, 100] float32) by `way`."""
    from replay.client import Client

    client = Client(address)
    writer = client.trajectory_writer(num_keep_alive_refs=100)
    server_start = _process_cpu_seconds(server_pid) if server_pid else 0.0
    start, start_cpu, start_thread = time.perf_counter(), time.process_time(), time.thread_time()
    for batch in batches:
        if way == "extend":
            writer.extend(batch)
        else:
            for row in batch:
                writer.append(row)
        writer.create_item("bench", 1.0, writer.history[-len(batch):])
    writer.flush()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    thread_seconds = time.thread_time() - start_thread
    server_seconds = _process_cpu_seconds(server_pid) - server_start if server_pid else 0.0
    writer.close()
    client.close()
    steps = sum(len(b) for b in batches)
    return steps / seconds, steps / cpu_seconds, steps / thread_seconds, server_seconds / steps * 1e6


def run_extend(args) -> None:
    from tools import replay_workload

    with replay_workload.server_process("replay", replay_workload.MAX_ITEMS) as server:
        address = server.address
        rng = np.random.default_rng(0)
        batches = [rng.random((100, 100), dtype=np.float32) for _ in range(max(1, args.ops // 100))]
        _extend_case(address, "extend", batches[:10])  # warm-up: connection, first stream
        if args.profile:
            import cProfile
            import pstats

            profile = cProfile.Profile(time.thread_time)  # the writer's thread, not the stream's
            profile.enable()
            _extend_case(address, "extend", batches)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)
            return
        best = {"append": (0.0, 0.0, 0.0), "extend": (0.0, 0.0, 0.0)}
        server_us = {"append": [], "extend": []}
        for _ in range(3):
            for way in best:
                *rates, server_us_per_step = _extend_case(address, way, batches, server.pid)
                best[way] = tuple(map(max, best[way], rates))
                server_us[way].append(server_us_per_step)
        for way, (wall, cpu, thread) in best.items():
            print(f"writer_{way} steps=400B batch=100 keep=100 steps_per_s={wall:.0f} "
                  f"steps_per_cpu_s={cpu:.0f} steps_per_writer_thread_cpu_s={thread:.0f} "
                  f"server_cpu_us_per_step={min(server_us[way]):.2f}", flush=True)
        ratios = [e / a for e, a in zip(best["extend"], best["append"])]
        print(f"writer_extend_over_append ratio={ratios[0]:.2f} cpu_ratio={ratios[1]:.2f} "
              f"writer_thread_cpu_ratio={ratios[2]:.2f}", flush=True)


def run_server(mode):
    def run(args) -> None:
        from tools import bench_replay_server

        for payload in args.payloads:
            for clients in args.clients:
                print(bench_replay_server.run_case(mode, payload, clients, args.duration), flush=True)

    return run


def run_dataset(args) -> None:
    from tools import bench_dataset

    bench_dataset.run_dataset_mode(args.dataset_payloads, args.duration if args.duration != 3.0 else 10.0,
                                   args.dataset_workers)


MODES = {
    "dataset": run_dataset,
    "extend": run_extend,
    "inprocess": run_inprocess,
    "insert-path": run_insert_path,
    "server-insert": run_server("insert"),
    "validate": run_validate,
    "server-sample": run_server("sample"),
    "server-sample-stream": run_server("sample_stream"),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=sorted(MODES), default="inprocess")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 1_000_000])
    parser.add_argument("--selectors", nargs="+", choices=list(SELECTORS), default=list(SELECTORS))
    parser.add_argument("--ops", type=int, default=50_000, help="timed operations per case")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4], help="server modes: client processes")
    parser.add_argument("--payloads", type=int, nargs="+", default=[400, 4_000, 40_000, 400_000],
                        help="server modes: bytes per item")
    parser.add_argument("--duration", type=float, default=3.0, help="server modes: seconds per case")
    parser.add_argument("--dataset", action="store_true", help="same as --mode dataset")
    parser.add_argument("--profile", action="store_true", help="extend mode: cProfile one extend run")
    parser.add_argument("--dataset-payloads", type=int, nargs="+", default=[400, 40_000],
                        help="dataset mode: bytes per item")
    parser.add_argument("--dataset-workers", type=int, default=-1,
                        help="dataset mode: num_workers_per_iterator")
    args = parser.parse_args(argv)
    if args.dataset:
        args.mode = "dataset"
    MODES[args.mode](args)


if __name__ == "__main__":
    main()
