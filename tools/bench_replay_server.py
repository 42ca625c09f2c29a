"""Replay server benchmarks: one server process, N client processes on loopback.

Workload: the Reverb comparison's (tools/replay_workload.py, which this runs with backend
"replay"): each item is one float32 tensor of random data of the given payload size, chunk
length 1, sequence length 1; the table is Uniform/Fifo with MinSize(1) and 100k items max (fewer
of large items: 200 MB of payload at most). Insert mode times writers appending and creating
items with the legacy `Client.writer` for a fixed duration (including the final flush); sample
mode pre-fills the table and times `Client.sample` of whole items (`emit_timesteps=False`), and,
as `sample_stream`, the batched low-overhead path. Prints one line per case with items/s and
MB/s. Run as `python tools/bench_replay_server.py [--clients 1 4] [--payloads 400 4000 40000 400000]`;
tools/bench_replay.py runs the same cases with `--mode server-insert` (`server-sample`,
`server-sample-stream`).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools import replay_workload  # noqa: E402

PAYLOADS = (400, 4_000, 40_000, 400_000)
MODES = ("insert", "sample", "sample_stream")


def run_case(mode: str, payload_bytes: int, num_clients: int, duration: float = 3.0) -> str:
    """Runs one case in fresh processes and returns its result line.

    Raises:
      RuntimeError: a process of the case failed (its traceback in the message).
    """
    result = replay_workload.run("replay", mode, payload_bytes, num_clients, duration, legacy_writer=True,
                                 whole_items=True)
    if "error" in result:
        raise RuntimeError(f"server {mode} payload {payload_bytes} B clients {num_clients}:\n{result['error']}")
    rate = result["items"] / result["seconds"]
    return (f"server {mode:13s} payload {payload_bytes:>7d} B  clients {num_clients}  "
            f"{rate:10.0f} items/s  {rate * payload_bytes / 1e6:8.1f} MB/s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
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
