"""Benchmark of ReplayDataset: items/s through `ReplayDataset(...).batch(32)`.

A replay server runs in another process with one Uniform/Fifo table (MinSize(1)) filled with
items of one float32 tensor of the given payload size (chunk length 1, sequence length 1); this
process reads it through `ReplayDataset(...).batch(32)` for a fixed time and prints one line
per case with items/s and MB/s.

    python tools/bench_dataset.py [--payloads 400,40000] [--seconds 10] [--workers -1]
    python tools/bench_dataset.py --step-items 16

`--step-items K` measures DQN's layout instead: CartPole-like transitions (obs, new_obs, action,
reward, terminated, n_steps, weight) written as single-step items into chunks of K steps, read
through `ReplayDataset(...).batch(64)` with 128 samples in flight, as the replay optimizer does.
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def _transition(rng, np):
    return {"obs": rng.random(4, dtype=np.float32), "new_obs": rng.random(4, dtype=np.float32),
            "actions": np.int64(rng.integers(2)), "rewards": np.float32(1.0),
            "terminateds": np.bool_(False), "n_steps": np.int32(3), "weights": np.float32(1.0)}


def _serve(payload_bytes: int, num_items: int, port_queue, stop_event, step_chunk_length: int = 0) -> None:
    import numpy as np

    from replay import rate_limiters, selectors, specs
    from replay.server import Server
    from replay.table import Table

    rng = np.random.default_rng(0)
    if step_chunk_length:
        signature = {k: specs.TensorSpec(np.shape(v), np.asarray(v).dtype)
                     for k, v in _transition(rng, np).items()}
    else:
        signature = specs.TensorSpec((payload_bytes // 4,), np.float32)
    table = Table("bench", selectors.Uniform(), selectors.Fifo(), max(num_items, 1),
                  rate_limiters.MinSize(1), signature=signature)
    server = Server([table])
    client = server.localhost_client()
    with client.trajectory_writer(1, chunk_length=step_chunk_length or None) as writer:
        for _ in range(num_items):
            step = (_transition(rng, np) if step_chunk_length
                    else rng.random(payload_bytes // 4, dtype=np.float32))
            writer.create_item("bench", 1.0, writer.append(step))
        writer.flush()
    port_queue.put(server.port)
    stop_event.wait()
    server.stop()


@contextlib.contextmanager
def _server_process(payload_bytes: int, num_items: int, step_chunk_length: int = 0):
    """A filled replay server in a spawned process; yields its address, stops it on exit."""
    context = multiprocessing.get_context("spawn")
    port_queue, stop_event = context.Queue(), context.Event()
    process = context.Process(target=_serve, args=(payload_bytes, num_items, port_queue, stop_event,
                                                   step_chunk_length), daemon=True)
    process.start()
    try:
        yield f"127.0.0.1:{port_queue.get(timeout=300)}"
    finally:
        stop_event.set()
        process.join(10)
        if process.is_alive():
            process.kill()


def _read_for(dataset, seconds: float):
    """(items, seconds) read from `dataset` in about `seconds`, after a warm-up (streams open,
    tf.data threads start)."""
    iterator = iter(dataset)
    for _ in range(20):
        next(iterator)
    items, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        items += int(next(iterator).info.key.shape[0])
    return items, time.perf_counter() - start


def bench_dataset_case(payload_bytes: int, seconds: float, workers: int = -1, batch_size: int = 32,
                       max_in_flight: int = 1024, num_items: int = 0) -> dict:
    """Items/s through ReplayDataset(...).batch(batch_size) from a server in another process."""
    import tensorflow as tf

    from replay.dataset import ReplayDataset

    num_items = num_items or (20_000 if payload_bytes <= 4_000 else 2_000)
    with _server_process(payload_bytes, num_items) as address:
        dataset = ReplayDataset(address, "bench", dtypes=tf.float32, shapes=[payload_bytes // 4],
                                max_in_flight_samples_per_worker=max_in_flight,
                                num_workers_per_iterator=workers).batch(batch_size)
        items, elapsed = _read_for(dataset, seconds)
    return {"payload_bytes": payload_bytes, "items_per_s": items / elapsed,
            "mb_per_s": items * payload_bytes / elapsed / 1e6, "workers": workers}


def bench_step_items_case(chunk_length: int, seconds: float, num_items: int = 20_000) -> dict:
    """Transitions/s through ReplayDataset(...).batch(64) of single-step items cut from chunks
    of `chunk_length` steps (DQN's replay layout), server in another process."""
    from replay.dataset import ReplayDataset

    with _server_process(0, num_items, chunk_length) as address:
        dataset = ReplayDataset.from_table_signature(address, "bench", 128,
                                                     num_workers_per_iterator=1).batch(64)
        items, elapsed = _read_for(dataset, seconds)
    return {"items_per_s": items / elapsed, "ms_per_batch": 64e3 * elapsed / max(items, 1)}


def run_dataset_mode(payloads, seconds: float, workers: int) -> None:
    """Prints one line per payload size."""
    for payload in payloads:
        result = bench_dataset_case(payload, seconds, workers)
        print(f"dataset payload={payload}B batch=32 workers={workers}: "
              f"{result['items_per_s']:.0f} items/s {result['mb_per_s']:.1f} MB/s", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payloads", default="400,40000")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=-1)
    parser.add_argument("--step-items", type=int, default=0, metavar="K",
                        help="measure single-step transitions from chunks of K steps instead")
    args = parser.parse_args(argv)
    if args.step_items:
        result = bench_step_items_case(args.step_items, args.seconds)
        print(f"dataset step-items chunk={args.step_items} batch=64: {result['items_per_s']:.0f} "
              f"items/s {result['ms_per_batch']:.2f} ms/batch", flush=True)
        return
    run_dataset_mode([int(p) for p in args.payloads.split(",")], args.seconds, args.workers)


if __name__ == "__main__":
    main()
