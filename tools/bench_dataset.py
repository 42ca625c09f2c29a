"""Benchmark of ReplayDataset: items/s through `ReplayDataset(...).batch(32)`.

A replay server runs in another process with one Uniform/Fifo table (MinSize(1)) filled with
items of one float32 tensor of the given payload size (chunk length 1, sequence length 1); this
process reads it through `ReplayDataset(...).batch(32)` for a fixed time and prints one line
per case with items/s and MB/s. The server, the filling and the reading are
tools/replay_workload.py's (its dataset case, read here in this process).

    python tools/bench_dataset.py [--payloads 400,40000] [--seconds 10] [--workers -1]
    python tools/bench_dataset.py --step-items 16

`--step-items K` measures DQN's layout instead: CartPole-like transitions (obs, new_obs, action,
reward, terminated, n_steps, weight) written as single-step items into chunks of K steps, read
through `ReplayDataset(...).batch(64)` with 128 samples in flight, as the replay optimizer does.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from tools import replay_workload  # noqa: E402


def _transition(rng, np):
    return {"obs": rng.random(4, dtype=np.float32), "new_obs": rng.random(4, dtype=np.float32),
            "actions": np.int64(rng.integers(2)), "rewards": np.float32(1.0),
            "terminateds": np.bool_(False), "n_steps": np.int32(3), "weights": np.float32(1.0)}


def bench_dataset_case(payload_bytes: int, seconds: float, workers: int = -1, batch_size: int = 32,
                       max_in_flight: int = 1024, num_items: int = 0) -> dict:
    """Items/s through ReplayDataset(...).batch(batch_size) from a server in another process
    (replay_workload's server, filled as its dataset case fills it, read by its dataset reader)."""
    num_items = num_items or (20_000 if payload_bytes <= 4_000 else 2_000)
    with replay_workload.server_process("replay", num_items) as server:
        replay_workload.fill("replay", server.address, payload_bytes, num_items)
        loop = replay_workload.dataset_loop("replay", server.address, payload_bytes, max_in_flight,
                                            batch_size=batch_size, num_workers=workers)
        items, elapsed, _ = replay_workload.timed(loop, seconds)
    return {"payload_bytes": payload_bytes, "items_per_s": items / elapsed,
            "mb_per_s": items * payload_bytes / elapsed / 1e6, "workers": workers}


def bench_step_items_case(chunk_length: int, seconds: float, num_items: int = 20_000) -> dict:
    """Transitions/s through ReplayDataset(...).batch(64) of single-step items cut from chunks
    of `chunk_length` steps (DQN's replay layout), server in another process."""
    import numpy as np

    from replay import specs
    from replay.client import Client
    from replay.dataset import ReplayDataset

    rng = np.random.default_rng(0)
    signature = {k: specs.TensorSpec(np.shape(v), np.asarray(v).dtype) for k, v in _transition(rng, np).items()}
    with replay_workload.server_process("replay", num_items, signature) as server:
        with Client(server.address).trajectory_writer(1, chunk_length=chunk_length) as writer:
            for _ in range(num_items):
                writer.create_item(replay_workload.TABLE, 1.0, writer.append(_transition(rng, np)))
            writer.flush()
        dataset = ReplayDataset.from_table_signature(server.address, replay_workload.TABLE, 128,
                                                     num_workers_per_iterator=1).batch(64)
        items, elapsed, _ = replay_workload.timed(replay_workload.batches_loop(dataset), seconds)
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
