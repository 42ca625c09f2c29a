"""Replay server benchmarks: one server process, N client processes on loopback.

Workload (the Reverb comparison workload): each item is one float32 tensor of random data of
the given payload size, chunk length 1, sequence length 1, written with `Client.writer`; the
table is Uniform/Fifo with 100k items max and MinSize(1). Insert mode times writers appending
and creating items for a fixed duration (including the final flush); sample mode pre-fills the
table and times `Client.sample` (and, as `sample_stream`, the batched low-overhead path).
Prints one line per case with items/s and MB/s. Run as
`python tools/bench_replay_server.py [--clients 1 4] [--payloads 400 4000 40000 400000]`;
tools/bench_replay.py runs the same cases with `--server`.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TABLE = "bench"
PAYLOADS = (400, 4_000, 40_000, 400_000)


def _serve(port_queue, stop_event):
    from replay import rate_limiters, selectors
    from replay.server import Server
    from replay.table import Table

    table = Table(TABLE, selectors.Uniform(), selectors.Fifo(), 100_000, rate_limiters.MinSize(1))
    server = Server([table])
    port_queue.put(server.port)
    stop_event.wait()
    server.stop(grace=None)


def _payloads(payload_bytes: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.random(payload_bytes // 4, dtype=np.float32) for _ in range(8)]


def _insert_worker(address, payload_bytes, duration, start_barrier, result_queue, seed):
    from replay.client import Client

    data = _payloads(payload_bytes, seed)
    client = Client(address)
    writer = client.writer(max_sequence_length=1, chunk_length=1)
    start_barrier.wait()
    start = time.perf_counter()
    count = 0
    while True:
        for array in data:
            writer.append(array)
            writer.create_item(TABLE, 1, 1.0)
        count += len(data)
        if time.perf_counter() - start >= duration:
            break
    writer.flush()
    elapsed = time.perf_counter() - start
    writer.close()
    result_queue.put((count, elapsed))


def _sample_worker(address, mode, duration, start_barrier, result_queue):
    from replay.client import Client

    client = Client(address)
    # connect and learn the signature outside the timing
    next(client.sample(TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True))
    start_barrier.wait()
    start = time.perf_counter()
    count = 0
    while time.perf_counter() - start < duration:
        if mode == "sample":
            for _ in client.sample(TABLE, 1000, emit_timesteps=False, unpack_as_table_signature=True):
                count += 1
        else:
            for infos, _ in client.sample_stream(TABLE, max_in_flight_samples=512, max_samples=2000):
                count += len(infos["key"])
    result_queue.put((count, time.perf_counter() - start))


def _fill(address, payload_bytes, num_items):
    from replay.client import Client

    data = _payloads(payload_bytes, 0)
    with Client(address).writer(1, chunk_length=1) as writer:
        for i in range(num_items):
            writer.append(data[i % len(data)])
            writer.create_item(TABLE, 1, 1.0)


def run_case(mode: str, payload_bytes: int, num_clients: int, duration: float = 3.0) -> str:
    """Runs one case in fresh processes and returns its result line."""
    ctx = mp.get_context("spawn")
    port_queue, stop_event = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(port_queue, stop_event), daemon=True)
    server.start()
    address = f"localhost:{port_queue.get(timeout=60)}"
    try:
        barrier, results = ctx.Barrier(num_clients), ctx.Queue()
        if mode == "insert":
            workers = [ctx.Process(target=_insert_worker,
                                   args=(address, payload_bytes, duration, barrier, results, i))
                       for i in range(num_clients)]
        else:
            _fill(address, payload_bytes, min(10_000, max(200, 200_000_000 // (payload_bytes * 20))))
            workers = [ctx.Process(target=_sample_worker, args=(address, mode, duration, barrier, results))
                       for _ in range(num_clients)]
        for w in workers:
            w.start()
        outcomes = [results.get(timeout=duration * 10 + 120) for _ in workers]
        for w in workers:
            w.join()
    finally:
        stop_event.set()
        server.join(timeout=30)
    items = sum(c for c, _ in outcomes)
    elapsed = max(e for _, e in outcomes)
    rate = items / elapsed
    return (f"server {mode:13s} payload {payload_bytes:>7d} B  clients {num_clients}  "
            f"{rate:10.0f} items/s  {rate * payload_bytes / 1e6:8.1f} MB/s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", default=["insert", "sample", "sample_stream"],
                        choices=["insert", "sample", "sample_stream"])
    parser.add_argument("--clients", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--payloads", nargs="+", type=int, default=list(PAYLOADS))
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per case")
    args = parser.parse_args(argv)
    for mode in args.modes:
        for payload in args.payloads:
            for clients in args.clients:
                print(run_case(mode, payload, clients, args.duration), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
