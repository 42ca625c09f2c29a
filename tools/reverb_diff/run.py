"""Differential testing of `replay.reverb` against dm-reverb 0.14 itself.

Generates operation sequences of one family of Reverb's API (generate.py, hypothesis, seeded),
runs them with Reverb's Python against `reverb` and with this Python against `replay.reverb`
(executor.py, one process a side), and compares every observable (compare.py). Known divergences
(divergences.py) are counted apart; anything else is printed with the shortest sequence that
shows it, cut after the op where it appears.

    python tools/reverb_diff/run.py --reverb-python PATH --family selectors --sequences 10000 --seed 1
    python tools/reverb_diff/run.py --reverb-python PATH --family all --sequences 300 --seed 7 \\
        --record tests/replay/reverb_diff

`--record DIR` writes Reverb's observations of the run as DIR/<family>.json, the expectations
tests/replay/test_reverb_diff.py replays on this side only. Exit status 1 when a divergence that
is not listed was found.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOOLS = os.path.dirname(_HERE)
_ROOT = os.path.dirname(_TOOLS)
sys.path.insert(0, _ROOT)  # `python tools/reverb_diff/run.py` from a checkout

from tools.peer_python import peer_unavailable  # noqa: E402
from tools.reverb_diff import compare, divergences, generate  # noqa: E402

_EXECUTOR = os.path.join(_HERE, "executor.py")


def _start(python: str, module: str, path: str, pythonpath: str = "") -> subprocess.Popen:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.Popen([python, _EXECUTOR, "--module", module, "--input", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _collect(process: subprocess.Popen, timeout: float, side: str) -> List[Any]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise SystemExit(f"{side}: the executor ran past {timeout:.0f}s (a call blocked?)\n{err[-2000:]}") from None
    if process.returncode != 0:
        raise SystemExit(f"{side}: the executor failed ({process.returncode})\n{err[-3000:]}")
    timing = [line for line in err.splitlines() if line.startswith("executor ")]
    if timing:
        print("  " + timing[-1], flush=True)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def run_both(reverb_python: str, sequences: List[Dict[str, Any]], timeout: float):
    """Reverb's and our observations of `sequences`, the two executors running side by side."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "sequences.json")
        with open(path, "w") as f:
            json.dump(sequences, f)
        theirs = _start(reverb_python, "reverb", path)
        ours = _start(sys.executable, "replay.reverb", path, pythonpath=_ROOT)
        reverb_observations = _collect(theirs, timeout, "reverb")
        our_observations = _collect(ours, timeout, "replay.reverb")
    return reverb_observations, our_observations


def _cut(sequence: Dict[str, Any], index: int) -> Dict[str, Any]:
    """The sequence up to and including op `index` (the tables and columns as they were)."""
    cut = {k: v for k, v in sequence.items() if k != "ops"}
    cut["ops"] = sequence["ops"][:index + 1] if index >= 0 else sequence["ops"]
    return cut


def report(family: str, sequences, reverb_observations, our_observations) -> int:
    """Prints the divergences of one family's run; returns how many sequences diverge in a way
    the list does not know."""
    known: Dict[str, int] = {}
    unknown: Dict[str, List] = {}
    for sequence, theirs, ours in zip(sequences, reverb_observations, our_observations):
        found = divergences.classify(sequence, compare.compare_sequence(sequence, theirs, ours))
        for name in found["known"]:
            known[name] = known.get(name, 0) + 1
        for difference in found["unknown"]:
            key = f"{difference['op']['op']} {' '.join(difference['paths'][:2])}"
            unknown.setdefault(key, []).append((sequence, difference))
            break
    diverging = sum(len(v) for v in unknown.values())
    print(f"{family}: {len(sequences)} sequences, {sum(len(s['ops']) for s in sequences)} ops; "
          f"listed divergences {known or 'none'}; {diverging} sequences with an unlisted one", flush=True)
    for key, cases in sorted(unknown.items(), key=lambda kv: -len(kv[1])):
        sequence, difference = min(cases, key=lambda c: (c[1]["index"] + 1, len(json.dumps(c[0]))))
        print(f"  UNLISTED [{len(cases)} sequences] {key}")
        print(f"    shortest: {json.dumps(_cut(sequence, difference['index']))}")
        print(f"    reverb:   {json.dumps(difference['reverb'])[:600]}")
        print(f"    ours:     {json.dumps(difference['ours'])[:600]}")
    return diverging


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reverb-python", help="a Python with dm-reverb 0.14 installed")
    parser.add_argument("--family", default="all", help=f"one of {sorted(generate.FAMILIES)} or all")
    parser.add_argument("--sequences", type=int, default=1000, help="sequences per family")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", metavar="DIR", help="write Reverb's observations as DIR/<family>.json")
    parser.add_argument("--save-run", metavar="DIR", help="also write both sides' observations as DIR/<family>.json")
    parser.add_argument("--report", metavar="DIR", help="report a run saved with --save-run again (no executors)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per family and side")
    args = parser.parse_args(argv)
    reason = None if args.report else peer_unavailable(args.reverb_python, "reverb", "--reverb-python")
    if reason:
        print(f"reverb not available: {reason}")
        return 2
    families = sorted(generate.FAMILIES) if args.family == "all" else [args.family]
    unlisted = 0
    for family in families:
        started = time.time()
        if args.report:
            with open(os.path.join(args.report, f"{family}.json")) as f:
                saved = json.load(f)
            unlisted += report(family, saved["sequences"], saved["reverb"], saved["ours"])
            continue
        sequences = generate.generate(family, args.sequences, args.seed)
        print(f"{family}: generated {len(sequences)} sequences (seed {args.seed}) in {time.time() - started:.1f}s",
              flush=True)
        reverb_observations, our_observations = run_both(args.reverb_python, sequences, args.timeout)
        unlisted += report(family, sequences, reverb_observations, our_observations)
        if args.save_run:
            os.makedirs(args.save_run, exist_ok=True)
            with open(os.path.join(args.save_run, f"{family}.json"), "w") as f:
                json.dump({"family": family, "seed": args.seed, "sequences": sequences, "reverb": reverb_observations,
                           "ours": our_observations}, f, separators=(",", ":"))
        if args.record:
            os.makedirs(args.record, exist_ok=True)
            with open(os.path.join(args.record, f"{family}.json"), "w") as f:
                json.dump({"family": family, "seed": args.seed, "sequences": sequences,
                           "reverb": reverb_observations}, f, separators=(",", ":"), sort_keys=True)
        print(f"{family}: {time.time() - started:.0f}s", flush=True)
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
