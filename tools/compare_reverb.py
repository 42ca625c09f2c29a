"""This project's replay service against dm-reverb, side by side in one run.

Every case runs the same workload script (tools/replay_workload.py) twice: once with this
Python against `replay`, once with the Python given by `--reverb-python` (one that has
dm-reverb installed) against Reverb, back to back; which side goes first alternates from case to
case (and from repeat to repeat), so load that drifts during the run hits both. Workload: a
server process and client processes on loopback, one float32 tensor of random data per item,
chunk length 1, sequence length 1, a Uniform/Fifo table of 100k items with MinSize(1), items
written with the trajectory writer (`append` + `create_item(table, 1.0, history[-1])`),
this project with its defaults (insert validation, limits, deadlines all on); its server
process runs as the `replay-server` command runs it (`freeze_gc`, `keep_freed_heap_memory`) and
its dataset process keeps freed heap memory (`ReplayDataset(keep_freed_heap_memory=True)`, as
the `tfrl train` command's learner does; see replay/heap_policy.py).

Prints one line per case: `case ours reverb ratio` in items/s (ratio = ours / reverb; above 1.0
this project is faster), preceded by the load average. With `--cpu`, each line also gives both
sides' CPU time per item in microseconds (user plus system, all threads, over the timed window):
the server process's, then all client processes' together; on 2 cores their sum bounds the rate
(two CPU-seconds a second), which is where a side's time goes. Reverb is not a dependency: without a
usable `--reverb-python` each line says "reverb not available".

Set up a Reverb Python once (outside the checkout):
    python3 -m venv V && V/bin/pip install "dm-reverb[tensorflow]==0.14.0" "tensorflow==2.15.*"
Then:
    python tools/compare_reverb.py --reverb-python V/bin/python [--seconds 3] [--cases ...]

With `--reverb-names` the other side is this project through `replay.reverb` (Reverb's names,
the Reverb side's code, this Python, the project's server), so the ratio is what those names
cost against the native API (`ours / reverb-names`; 1.05 means the names are 5% slower). The
native side then samples with one sample requested ahead, as Reverb's `Client.sample` does
(`replay.reverb` keeps that), so the sample cases compare the names, not the flow control.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

from peer_python import peer_unavailable

_HERE = os.path.dirname(os.path.abspath(__file__))
_WORKLOAD = os.path.join(_HERE, "replay_workload.py")

# name -> (workload case, payload bytes, clients)
CASES: Dict[str, Tuple[str, int, int]] = {
    "insert-400B-1c": ("insert", 400, 1),
    "insert-400B-4c": ("insert", 400, 4),
    "insert-40kB-1c": ("insert", 40_000, 1),
    "insert-40kB-4c": ("insert", 40_000, 4),
    "sample-400B-1c": ("sample", 400, 1),
    "sample-400B-4c": ("sample", 400, 4),
    "sample-40kB-1c": ("sample", 40_000, 1),
    "sample-40kB-4c": ("sample", 40_000, 4),
    "dataset-400B-b32": ("dataset", 400, 1),
    "dataset-40kB-b32": ("dataset", 40_000, 1),
}


def reverb_unavailable(python: Optional[str]) -> Optional[str]:
    """Why `python` cannot run the Reverb side (None when it can)."""
    return peer_unavailable(python, "reverb", "--reverb-python")


def run_side(python: str, backend: str, case: str, payload: int, clients: int,
             seconds: float, sample_in_flight: Optional[int] = None
             ) -> Tuple[Optional[float], Optional[Tuple[Optional[float], float]], Optional[str]]:
    """(items/s, CPU microseconds per item of (the server, the clients together), None) for one
    side of one case, or (None, None, why it failed). The server's figure is None where /proc
    cannot tell."""
    command = [python, _WORKLOAD, "--backend", backend, "--case", case, "--payload", str(payload),
               "--clients", str(clients), "--seconds", str(seconds)]
    if sample_in_flight is not None:
        command += ["--sample-in-flight", str(sample_in_flight)]
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 20 + 600,
                              env=env)
    except subprocess.TimeoutExpired:
        return None, None, "timed out"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return None, None, (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    result = json.loads(lines[-1])
    if "error" in result:
        return None, None, result["error"].strip().splitlines()[-1]
    items, cpu = max(result["items"], 1), result["cpu"]
    server_us = None if cpu["server"] is None else cpu["server"] / items * 1e6
    return result["items"] / result["seconds"], (server_us, cpu["clients"] / items * 1e6), None


def _cpu_text(cpu: Optional[Tuple[Optional[float], float]]) -> str:
    if cpu is None:
        return "-"
    server, clients = cpu
    return f"{'-' if server is None else f'{server:.1f}'} / {clients:.1f}"


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reverb-python", default=None,
                        help="a Python interpreter with dm-reverb installed")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case and side")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeat", type=int, default=1, help="runs of the whole list")
    parser.add_argument("--reverb-names", action="store_true",
                        help="compare with this project's replay.reverb instead of dm-reverb")
    parser.add_argument("--cpu", action="store_true",
                        help="also print each side's CPU microseconds per item: server / clients")
    args = parser.parse_args(argv)

    other = "replay.reverb" if args.reverb_names else "reverb"
    unavailable = None if args.reverb_names else reverb_unavailable(args.reverb_python)
    print(f"# {_load()}; {args.seconds:g} s per case and side", flush=True)
    header = f"{'case':18s} {'ours':>10s} {other:>13s} {'ratio':>6s}"
    if args.cpu:
        header += f"  {'ours us/item srv/cli':>21s}  {other + ' us/item srv/cli':>23s}"
    print(header, flush=True)
    order = 0
    for _ in range(args.repeat):
        for name in args.cases:
            case, payload, clients = CASES[name]
            sides = ["replay", other] if order % 2 == 0 else [other, "replay"]
            order += 1
            rates: Dict[str, Optional[float]] = {}
            cpu: Dict[str, Optional[Tuple[Optional[float], float]]] = {}
            notes = []
            for backend in sides:
                if backend == "reverb" and unavailable:
                    rates[backend] = cpu[backend] = None
                    continue
                python = args.reverb_python if backend == "reverb" else sys.executable
                in_flight = 1 if args.reverb_names and backend == "replay" else None
                rates[backend], cpu[backend], error = run_side(python, backend, case, payload, clients,
                                                               args.seconds, in_flight)
                if error:
                    notes.append(f"{backend}: {error}")
            ours, theirs = rates["replay"], rates[other]
            ours_text = f"{ours:10.0f}" if ours is not None else f"{'failed':>10s}"
            if unavailable:
                line = f"{name:18s} {ours_text} reverb not available ({unavailable})"
            else:
                theirs_text = f"{theirs:13.0f}" if theirs is not None else f"{'failed':>13s}"
                ratio = f"{ours / theirs:6.2f}" if ours and theirs else f"{'-':>6s}"
                line = f"{name:18s} {ours_text} {theirs_text} {ratio}"
                if args.cpu:
                    line += f"  {_cpu_text(cpu['replay']):>21s}  {_cpu_text(cpu[other]):>23s}"
            if notes:
                line += "  # " + "; ".join(notes)
            print(line, flush=True)
    print(f"# {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
