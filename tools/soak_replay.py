"""Soak test of the replay service: a real `replay-server` process under many writers and readers.

    python tools/soak_replay.py --clients N --seconds S [--samplers 16] [--dataset]
                                [--writer-rate STEPS_PER_S] [--writer-processes 8] [--payload-bytes 64]

Starts `replay-server` (python -m replay.server_main) with two tables and, for S seconds:
- N writers (threads spread over --writer-processes processes, each with its own `Client`),
  each appending steps (flat out, or --writer-rate steps per second as an actor would)
  {"id": [writer, seq], "payload": float32[...]} and creating one item per
  step in both tables: `ledger` (Fifo, each item sampled once) and `replay` (Uniform, max_size
  small enough that items are evicted);
- --samplers samplers (threads of one process): half drain `ledger` through `sample_stream`,
  recording every item id they get; half sample `replay` and delete some of what they get;
- with --dataset, a `ReplayDataset` learner reading `replay` in batches of 32;
- a probe calling `server_info` every 0.2 s with a 1 s deadline, and at the end a
  `Client.insert(timeout=0.3)` against a full queue (it must raise about on time and never land).

After the writers stop, the ledger is drained and the tool prints one line of figures and the
accounting of each table (inserted = present + evicted + deleted), then exits non-zero on any
loss (an acknowledged item never seen), duplicate (an item seen twice, or inserted more often
than acknowledged), stall (a writer without progress for --stall-seconds, a probe over its
deadline) or error.
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import queue as queue_module
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = """\
tables:
  - name: ledger
    sampler: {kind: Fifo}
    remover: {kind: Fifo}
    max_size: 100000000
    max_times_sampled: 1
    rate_limiter: {kind: MinSize, min_size_to_sample: 1}
  - name: replay
    sampler: {kind: Uniform}
    remover: {kind: Fifo}
    max_size: %(replay_size)d
    rate_limiter: {kind: MinSize, min_size_to_sample: 1}
  - {name: blocked, kind: queue, max_size: 1}
"""


def _step(writer_id, seq, payload, np):
    return {"id": np.array([writer_id, seq], np.int64), "payload": payload}


def _writer_process(address, writer_ids, payload_floats, rate, stop, results, progress):
    """Runs one writer thread per id; reports (writer_id, acked, error) per writer and, every
    second, the age of the stalest writer's last progress."""
    import numpy as np

    from replay.client import Client

    last_progress = {w: time.monotonic() for w in writer_ids}

    def write(writer_id):
        acked, error, seq = 0, None, 0
        started = time.monotonic()
        payload = np.random.default_rng(writer_id).random(payload_floats, dtype=np.float32)
        try:
            client = Client(address)
            with client.trajectory_writer(num_keep_alive_refs=1, max_in_flight_items=64) as writer:
                next_batch = time.monotonic()
                while not stop.is_set():
                    if rate > 0:  # an actor producing `rate` steps per second
                        next_batch += 16 / rate
                        time.sleep(max(0.0, next_batch - time.monotonic()))
                    for _ in range(16):
                        refs = writer.append(_step(writer_id, seq, payload, np))
                        writer.create_item("ledger", 1.0, refs)
                        writer.create_item("replay", 1.0, refs)
                        seq += 1
                    writer.flush(block_until_num_items=32, timeout_ms=60_000)
                    last_progress[writer_id] = time.monotonic()
                    if seq % 256 == 0:
                        writer.end_episode(timeout_ms=60_000)
                writer.flush(timeout_ms=60_000)
                acked = seq
        except Exception as e:  # noqa: BLE001 - reported to the coordinator
            error = f"{e!r} after {time.monotonic() - started:.1f} s at step {seq}"
        last_progress[writer_id] = float("inf")
        results.put(("writer", writer_id, acked, error))

    threads = [threading.Thread(target=write, args=(w,), daemon=True) for w in writer_ids]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        now = time.monotonic()
        live = [now - t for t in last_progress.values() if t != float("inf")]
        progress.put(max(live, default=0.0))
        time.sleep(1.0)


def _sampler_process(address, num_samplers, stop, drain, results):
    """Samplers: even ones drain `ledger` (recording ids), odd ones sample `replay` and delete
    one in 16 of the keys they get."""
    import numpy as np  # noqa: F401 - loaded before the threads start

    from replay import errors
    from replay.client import Client

    def drain_ledger(sampler_id):
        seen, count, error = collections.Counter(), 0, None
        try:
            client = Client(address)
            while True:
                try:
                    for infos, columns in client.sample_stream("ledger", max_in_flight_samples=256,
                                                               rate_limiter_timeout_ms=1000, max_samples=4096):
                        ids = columns[0]
                        for writer_id, seq in ids.tolist():
                            seen[(writer_id, seq)] += 1
                        count += len(infos["key"])
                except errors.DeadlineExceededError:
                    if drain.is_set():
                        break  # the writers are done and the ledger is empty
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            error = repr(e)
        results.put(("ledger", sampler_id, count, error, dict(seen)))

    def sample_replay(sampler_id):
        count, deleted, error = 0, 0, None
        try:
            client = Client(address)
            while not stop.is_set():
                for infos, _ in client.sample_stream("replay", max_in_flight_samples=64,
                                                     rate_limiter_timeout_ms=10_000, max_samples=512,
                                                     timeout=60):
                    count += len(infos["key"])
                    keys = [int(k) for k in infos["key"][::16]]
                    client.mutate_priorities("replay", deletes=keys, timeout=10)
                    deleted += len(keys)
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            error = repr(e)
        results.put(("sampler", sampler_id, count, error, None))

    threads = [threading.Thread(target=drain_ledger if i % 2 == 0 else sample_replay, args=(i,), daemon=True)
               for i in range(num_samplers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _dataset_process(address, payload_floats, stop, results):
    import tensorflow as tf

    from replay.dataset import ReplayDataset

    count, error = 0, None
    try:
        dataset = ReplayDataset(address, "replay", {"id": tf.int64, "payload": tf.float32},
                                {"id": [2], "payload": [payload_floats]},
                                max_in_flight_samples_per_worker=128).batch(32)
        for batch in dataset:
            count += int(batch.data["id"].shape[0])
            if stop.is_set():
                break
    except Exception as e:  # noqa: BLE001 - every failure is counted and reported
        error = repr(e)
    results.put(("dataset", 0, count, error, None))


def _start_server(config_path):
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-m", "replay.server_main", "--config", config_path],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                               cwd=REPO_ROOT)
    for line in process.stdout:
        match = re.search(r"listening on ([\w.]+):(\d+)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
            return process, f"localhost:{match.group(2)}"
    raise RuntimeError("replay-server did not start")


def _insert_timeout_probe(client):
    """Seconds a Client.insert(timeout=0.3) against a full queue takes to raise, and whether the
    item landed later (after the queue is emptied)."""
    import numpy as np

    from replay import errors

    client.insert(np.float32(0), {"blocked": 1.0}, timeout=10)
    start = time.monotonic()
    try:
        client.insert(np.float32(1), {"blocked": 1.0}, timeout=0.3)
        raised_after = None
    except errors.DeadlineExceededError:
        raised_after = time.monotonic() - start
    next(iter(client.sample("blocked", 1, timeout=10, emit_timesteps=False, unpack_as_table_signature=True)))
    time.sleep(1.0)
    landed = client.server_info(timeout=5)["blocked"].num_inserts - 1
    return raised_after, landed


def run(args) -> int:
    from replay import errors
    from replay.client import Client

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        config_path = os.path.join(tmp, "tables.yaml")
        with open(config_path, "w") as f:
            f.write(CONFIG % {"replay_size": args.replay_size})
        if args.address:
            server, address = None, args.address
        else:
            server, address = _start_server(config_path)
        ctx = mp.get_context("spawn")
        stop, drain = ctx.Event(), ctx.Event()
        results, progress = ctx.Queue(), ctx.Queue()
        payload_floats = max(1, args.payload_bytes // 4)
        processes = []
        try:
            num_procs = max(1, min(args.writer_processes, args.clients))
            for p in range(num_procs):
                ids = list(range(p, args.clients, num_procs))
                processes.append(ctx.Process(
                    target=_writer_process,
                    args=(address, ids, payload_floats, args.writer_rate, stop, results, progress)))
            if args.samplers:
                processes.append(ctx.Process(target=_sampler_process,
                                             args=(address, args.samplers, stop, drain, results)))
            if args.dataset:
                processes.append(ctx.Process(target=_dataset_process,
                                             args=(address, payload_floats, stop, results)))
            for process in processes:
                process.start()
            client = Client(address)
            latencies, worst_stall = [], 0.0
            start = time.monotonic()
            while time.monotonic() - start < args.seconds:
                t0 = time.monotonic()
                try:
                    client.server_info(timeout=1.0)
                    latencies.append(time.monotonic() - t0)
                except errors.ReplayError as e:
                    failures.append(f"stall: server_info did not answer within 1 s ({e})")
                    latencies.append(time.monotonic() - t0)
                try:
                    while True:
                        worst_stall = max(worst_stall, progress.get_nowait())
                except queue_module.Empty:
                    pass
                time.sleep(0.2)
            elapsed = time.monotonic() - start
            if worst_stall > args.stall_seconds:
                failures.append(f"stall: a writer made no progress for {worst_stall:.1f} s")
            stop.set()
            timeout_raised_after, late_inserts = _insert_timeout_probe(client)
            if timeout_raised_after is None or late_inserts:
                failures.append(f"insert timeout probe: raised after {timeout_raised_after} s, "
                                f"{late_inserts} late inserts")

            expected_results = args.clients + args.samplers + (1 if args.dataset else 0)
            writers, ledger, samplers, dataset = {}, collections.Counter(), [], 0
            deadline = time.monotonic() + 600
            got = 0
            while got < expected_results and time.monotonic() < deadline:
                if len(writers) == args.clients:
                    drain.set()  # writers done: ledger consumers stop once it is empty
                try:
                    kind, ident, count, error, *rest = results.get(timeout=5)
                except queue_module.Empty:
                    continue
                got += 1
                if error:
                    failures.append(f"{kind} {ident}: {error}")
                if kind == "writer":
                    writers[ident] = count
                elif kind == "ledger":
                    ledger.update(rest[0])
                    samplers.append(count)
                elif kind == "sampler":
                    samplers.append(count)
                else:
                    dataset = count
            if got < expected_results:
                failures.append(f"stall: only {got} of {expected_results} workers reported back")
            info = client.server_info(timeout=10)
        finally:
            stop.set()
            drain.set()
            for process in processes:
                process.join(timeout=60)
                if process.is_alive():
                    process.kill()
            if server is not None:
                server.terminate()
                try:
                    server.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    server.kill()

    acked = sum(writers.values())
    expected = {(w, s) for w, n in writers.items() for s in range(n)}
    lost = len(expected - set(ledger))
    duplicated = sum(1 for c in ledger.values() if c > 1)
    unexpected = len(set(ledger) - expected)
    if lost or duplicated or unexpected:
        failures.append(f"ledger: {lost} acknowledged items never sampled, {duplicated} sampled twice, "
                        f"{unexpected} never acknowledged")
    accounting = []
    for name in ("ledger", "replay"):
        t = info[name]
        balanced = t.num_inserts == t.size + t.num_evictions + t.num_deletes
        if not balanced or t.num_inserts != acked:
            failures.append(f"table {name}: inserted {t.num_inserts} != acknowledged {acked} or "
                            f"!= present {t.size} + evicted {t.num_evictions} + deleted {t.num_deletes}")
        accounting.append(f"{name}: inserted {t.num_inserts} = present {t.size} + evicted {t.num_evictions} "
                          f"+ deleted {t.num_deletes} ({'ok' if balanced else 'MISMATCH'})")
    latencies.sort()
    p50 = latencies[len(latencies) // 2] if latencies else float("nan")
    p99 = latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan")
    print(f"soak clients {args.clients} (rate {args.writer_rate or 'flat out'}) samplers {args.samplers} "
          f"dataset {'yes' if args.dataset else 'no'} "
          f"{elapsed:.0f} s: writes {acked / elapsed:.0f} items/s into each table (acknowledged {acked}), "
          f"samples {sum(samplers) / elapsed:.0f}/s, dataset {dataset / elapsed:.0f} samples/s; "
          f"server_info p50 {p50 * 1000:.0f} ms p99 {p99 * 1000:.0f} ms max {max(latencies) * 1000:.0f} ms; "
          f"slowest writer progress gap {worst_stall:.1f} s; "
          f"insert(timeout=0.3) raised after {timeout_raised_after or float('nan'):.2f} s, late inserts "
          f"{late_inserts}; ledger {len(ledger)} items, lost {lost}, duplicated {duplicated}; "
          + "; ".join(accounting), flush=True)
    for failure in failures:
        print(f"FAIL {failure}", flush=True)
    print("result: " + ("OK" if not failures else f"{len(failures)} failure(s)"), flush=True)
    return 0 if not failures else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=64, help="writers")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the writers write")
    parser.add_argument("--samplers", type=int, default=16, help="sampler threads (half drain the ledger)")
    parser.add_argument("--dataset", action="store_true", help="also read through a ReplayDataset")
    parser.add_argument("--writer-processes", type=int, default=8, help="processes the writers are spread over")
    parser.add_argument("--writer-rate", type=float, default=0.0,
                        help="steps per second of each writer, as an actor would produce them (0: flat out)")
    parser.add_argument("--payload-bytes", type=int, default=64, help="float32 payload bytes per step")
    parser.add_argument("--replay-size", type=int, default=20_000, help="max_size of the replay table")
    parser.add_argument("--address", default=None,
                        help="soak a running server with the tables of CONFIG (in this file) instead of "
                             "starting one")
    parser.add_argument("--stall-seconds", type=float, default=20.0,
                        help="a writer without progress for this long is a stall")
    args = parser.parse_args(argv)
    if args.samplers < 2:
        parser.error("--samplers must be >= 2 (one drains the ledger, one samples replay)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
