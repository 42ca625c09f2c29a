"""This project's replay service against dm-reverb, side by side in one run.

Every case runs the same workload script (tools/replay_workload.py) on both sides: once with
this Python against `replay`, once with the Python given by `--reverb-python` (one that has
dm-reverb installed) against Reverb, back to back; which side goes first alternates from run to
run, and `--repeat` runs each side of a case several times, so load that drifts during the run
(the machine may be shared) hits both sides alike. Workload: a server process and client
processes on loopback, one float32 tensor of random data per item, chunk length 1, sequence
length 1, a Uniform/Fifo table with MinSize(1), items written with the trajectory writer
(`append` + `create_item(table, 1.0, history[-1])`). Both libraries run at their defaults: no
argument on either side that a user would not have to give.

Without `--sweep`: the README's ten cases. With `--sweep`: the whole operating range, datasets
(`.batch(32)`) over max_in_flight_samples_per_worker {1, 8, 64, 256, 1024} x payload {100 B,
4 kB, 40 kB, 400 kB} x reader processes {1, 4}, inserts over writer processes {1, 4, 16} x the
same payloads, and `Client.sample` of 4 kB items with num_samples {1, 100}; `--quick` runs
eleven of them, a corner of each axis. `--timesteps` makes the dataset cases read steps
(`ReplayDataset(emit_timesteps=True)` against Reverb's `TimestepDataset`).

Prints one line per case: `case ours reverb ratio runs` in items/s (ratio = the mean of ours / the
mean of reverb's; above 1.0 this project is faster; runs = the range of the runs' own ratios),
then the geometric mean and the minimum of the ratios, between the load averages. With `--cpu`,
each line also gives both sides' CPU time per item in microseconds (user plus system, all
threads, over the timed window): the server process's, then all client processes' together; on
2 cores their sum bounds the rate (two CPU-seconds a second), which is where a side's time goes.
Reverb is not a dependency: without a usable `--reverb-python` each line says "reverb not
available".

Set up a Reverb Python once (outside the checkout):
    python3 -m venv V && V/bin/pip install "dm-reverb[tensorflow]==0.14.0" "tensorflow==2.15.*"
Then:
    python tools/compare_reverb.py --reverb-python V/bin/python [--sweep [--quick]] [--cases ...]

With `--reverb-names` a third side runs: this project through `replay.reverb` (Reverb's names,
the Reverb side's code, this Python, the project's server). Each case then prints three ratios:
ours / reverb, names / reverb (what a user who ported by the import line gets) and
ours / names (what those names cost against the native API; 1.00 is no cost). Without
`--reverb-python` only ours / names is printed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from typing import Dict, List, NamedTuple, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))  # `python tools/compare_reverb.py` from a checkout

from tools.peer_python import peer_unavailable  # noqa: E402
_WORKLOAD = os.path.join(_HERE, "replay_workload.py")

class Case(NamedTuple):
    """One side-by-side case: the workload case, bytes per item, client processes, and for the
    sample case the num_samples of each call, for the dataset case its in-flight budget."""

    workload: str
    payload: int
    clients: int
    num_samples: Optional[int] = None
    in_flight: Optional[int] = None


# The cases run without --sweep (the README's table).
CASES: Dict[str, Case] = {
    "insert-400B-1c": Case("insert", 400, 1),
    "insert-400B-4c": Case("insert", 400, 4),
    "insert-40kB-1c": Case("insert", 40_000, 1),
    "insert-40kB-4c": Case("insert", 40_000, 4),
    "sample-400B-1c": Case("sample", 400, 1, num_samples=1000),
    "sample-400B-4c": Case("sample", 400, 4, num_samples=1000),
    "sample-40kB-1c": Case("sample", 40_000, 1, num_samples=1000),
    "sample-40kB-4c": Case("sample", 40_000, 4, num_samples=1000),
    "dataset-400B-b32": Case("dataset", 400, 1, in_flight=1024),
    "dataset-40kB-b32": Case("dataset", 40_000, 1, in_flight=1024),
}

SWEEP_IN_FLIGHT = (1, 8, 64, 256, 1024)
SWEEP_PAYLOADS = (100, 4_000, 40_000, 400_000)
SWEEP_READERS = (1, 4)
SWEEP_WRITERS = (1, 4, 16)
SWEEP_NUM_SAMPLES = (1, 100)
SWEEP_SAMPLE_PAYLOAD = 4_000


def _size_text(payload: int) -> str:
    return f"{payload // 1000}kB" if payload >= 1000 else f"{payload}B"


def sweep_cases() -> Dict[str, Case]:
    """The whole operating range: datasets over in-flight budgets x payloads x reader processes,
    inserts over writer processes x payloads, `Client.sample` over num_samples."""
    cases: Dict[str, Case] = {}
    for in_flight in SWEEP_IN_FLIGHT:
        for payload in SWEEP_PAYLOADS:
            for readers in SWEEP_READERS:
                cases[f"dataset-if{in_flight}-{_size_text(payload)}-{readers}r"] = Case(
                    "dataset", payload, readers, in_flight=in_flight)
    for writers in SWEEP_WRITERS:
        for payload in SWEEP_PAYLOADS:
            cases[f"insert-{_size_text(payload)}-{writers}w"] = Case("insert", payload, writers)
    for num_samples in SWEEP_NUM_SAMPLES:
        cases[f"sample-n{num_samples}-{_size_text(SWEEP_SAMPLE_PAYLOAD)}"] = Case(
            "sample", SWEEP_SAMPLE_PAYLOAD, 1, num_samples=num_samples)
    return cases


# --quick: a corner of each axis of the sweep, in minutes rather than most of an hour.
QUICK = ("dataset-if1-4kB-1r", "dataset-if8-100B-1r", "dataset-if64-40kB-1r", "dataset-if256-4kB-4r",
         "dataset-if1024-40kB-1r", "dataset-if1024-400kB-1r", "insert-100B-1w", "insert-40kB-4w",
         "insert-4kB-16w", "sample-n1-4kB", "sample-n100-4kB")


def reverb_unavailable(python: Optional[str]) -> Optional[str]:
    """Why `python` cannot run the Reverb side (None when it can)."""
    return peer_unavailable(python, "reverb", "--reverb-python")


def run_side(python: str, backend: str, case: Case, seconds: float,
             sample_in_flight: Optional[int] = None, timesteps: bool = False
             ) -> Tuple[Optional[float], Optional[Tuple[Optional[float], float]], Optional[str]]:
    """(items/s, CPU microseconds per item of (the server, the clients together), None) for one
    side of one case, or (None, None, why it failed). The server's figure is None where /proc
    cannot tell."""
    command = [python, _WORKLOAD, "--backend", backend, "--case", case.workload, "--payload",
               str(case.payload), "--clients", str(case.clients), "--seconds", str(seconds)]
    if sample_in_flight is not None:
        command += ["--sample-in-flight", str(sample_in_flight)]
    if case.num_samples is not None:
        command += ["--num-samples", str(case.num_samples)]
    if case.in_flight is not None:
        command += ["--in-flight", str(case.in_flight)]
    if timesteps:
        command += ["--timesteps"]
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


def _mean(values: List[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def geometric_mean(values: List[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _pairs(reverb_names: bool, with_reverb: bool) -> List[Tuple[str, str]]:
    """The (numerator, denominator) sides of each ratio printed: ours against Reverb; with
    --reverb-names ours against Reverb's names; with both, also those names against Reverb."""
    if not reverb_names:
        return [("replay", "reverb")]
    if not with_reverb:
        return [("replay", "replay.reverb")]
    return [("replay", "reverb"), ("replay.reverb", "reverb"), ("replay", "replay.reverb")]


_SHORT = {"replay": "ours", "replay.reverb": "names", "reverb": "reverb"}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reverb-python", default=None,
                        help="a Python interpreter with dm-reverb installed")
    parser.add_argument("--seconds", type=float, default=None,
                        help="timed seconds per case and side (default 3, with --sweep 2)")
    parser.add_argument("--sweep", action="store_true",
                        help="run the whole operating range (sweep_cases) instead of the README's cases")
    parser.add_argument("--quick", action="store_true", help="with --sweep: only its QUICK subset")
    parser.add_argument("--cases", nargs="+", default=None,
                        help="case names to run (of the sweep's with --sweep)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs of each case per side, the sides' order alternating "
                             "(default 1, with --sweep 2); a case's ratio is that of the means")
    parser.add_argument("--timesteps", action="store_true",
                        help="dataset cases read steps: ReplayDataset(emit_timesteps=True) against "
                             "Reverb's TimestepDataset")
    parser.add_argument("--reverb-names", action="store_true",
                        help="also run this project through replay.reverb (Reverb's names); with "
                             "--reverb-python three sides, without it instead of dm-reverb")
    parser.add_argument("--cpu", action="store_true",
                        help="also print each side's CPU microseconds per item: server / clients")
    args = parser.parse_args(argv)
    cases = sweep_cases() if args.sweep or args.quick else CASES
    names = list(args.cases) if args.cases else list(QUICK if args.quick else cases)
    unknown = [n for n in names if n not in cases]
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {sorted(cases)}")
    seconds = args.seconds if args.seconds is not None else (2.0 if args.sweep or args.quick else 3.0)
    repeat = args.repeat if args.repeat is not None else (2 if args.sweep or args.quick else 1)

    # with --reverb-names alone, Reverb's side is not run, so its absence is not reported
    unavailable = None if args.reverb_names and args.reverb_python is None else reverb_unavailable(args.reverb_python)
    pairs = _pairs(args.reverb_names, args.reverb_python is not None)
    sides = ["replay"] + [side for side in ("replay.reverb", "reverb") if any(side in pair for pair in pairs)]
    print(f"# {_load()}; {seconds:g} s per case and side, {repeat} run(s) of each side per case, "
          "the sides' order alternating", flush=True)
    header = f"{'case':24s} " + " ".join(f"{side:>13s}" for side in sides)
    header += " " + " ".join(f"{_SHORT[a] + '/' + _SHORT[b]:>12s}" for a, b in pairs) + f" {'runs':>11s}"
    if args.cpu:
        header += "  " + "  ".join(f"{_SHORT[side] + ' us/item srv/cli':>23s}" for side in sides)
    print(header, flush=True)
    order = 0
    ratios: Dict[Tuple[str, str], Dict[str, float]] = {pair: {} for pair in pairs}
    for name in names:
        case = cases[name]
        rates: Dict[str, List[float]] = {side: [] for side in sides}
        cpu: Dict[str, Optional[Tuple[Optional[float], float]]] = {side: None for side in sides}
        run_ratios: List[float] = []
        notes = []
        for _ in range(repeat):
            turn = order % len(sides)
            order += 1
            this_run: Dict[str, Optional[float]] = {}
            for backend in sides[turn:] + sides[:turn]:
                if backend == "reverb" and unavailable:
                    this_run[backend] = None
                    continue
                python = args.reverb_python if backend == "reverb" else sys.executable
                rate, cpu_us, error = run_side(python, backend, case, seconds, None,
                                               args.timesteps and case.workload == "dataset")
                this_run[backend] = rate
                if rate is not None:
                    rates[backend].append(rate)
                    cpu[backend] = cpu_us
                if error:
                    notes.append(f"{backend}: {error}")
            first, second = pairs[0]
            if this_run.get(first) and this_run.get(second):
                run_ratios.append(this_run[first] / this_run[second])
        means = {side: _mean(rates[side]) for side in sides}
        line = f"{name:24s} " + " ".join(
            f"{means[side]:13.0f}" if means[side] is not None else f"{'failed':>13s}" for side in sides)
        if unavailable and "reverb" in sides:
            ours = f"{means['replay']:13.0f}" if means["replay"] is not None else f"{'failed':>13s}"
            line = f"{name:24s} {ours} reverb not available ({unavailable})"
        else:
            for pair in pairs:
                a, b = means[pair[0]], means[pair[1]]
                if a and b:
                    ratios[pair][name] = a / b
                    line += f" {ratios[pair][name]:12.2f}"
                else:
                    line += f" {'-':>12s}"
            spread = (f"{min(run_ratios):.2f}-{max(run_ratios):.2f}" if len(run_ratios) > 1 else "-")
            line += f" {spread:>11s}"
            if args.cpu:
                line += "  " + "  ".join(f"{_cpu_text(cpu[side]):>23s}" for side in sides)
        if notes:
            line += "  # " + "; ".join(notes)
        print(line, flush=True)
    for (a, b), values in ratios.items():
        if values:
            worst = min(values, key=values.get)
            print(f"# {_SHORT[a]}/{_SHORT[b]}: {len(values)} of {len(names)} cases compared: geometric mean "
                  f"of the ratios {geometric_mean(list(values.values())):.2f}, minimum {values[worst]:.2f} "
                  f"({worst})", flush=True)
    print(f"# {_load()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
