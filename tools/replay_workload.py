"""One case of the Reverb comparison workload, run against this project or against dm-reverb.

tools/compare_reverb.py runs this script twice per case, once with this project's Python
(`--backend replay`) and once with a Python that has dm-reverb installed (`--backend reverb`),
so both sides run the same code (`--backend replay.reverb` runs the Reverb side's code against
this project's `replay.reverb`, on the project's server: what Reverb's names cost): a
server process and client processes on loopback, one float32 tensor of random data per item,
chunk length 1, sequence length 1, a Uniform (sampler) / Fifo (remover) table with MinSize(1)
of 100k items (fewer of large items: 200 MB of payload at most). Items are written through the
trajectory writer (`append`, then `create_item` with `history[-1]`). Both libraries run at their
defaults: every server, client, writer and dataset is built with only the arguments a user must
give (no tuning option on either side). Cases:

  insert   N client processes write items for the given time, then flush;
  sample   the table is filled first, then N client processes call
           `Client.sample(table, --num-samples)` in a loop;
  dataset  the table is filled first, then N processes each read `<Dataset>(...).batch(32)` with
           `max_in_flight_samples_per_worker=--in-flight` (this project's `ReplayDataset`,
           Reverb's `TrajectoryDataset`; with `--timesteps`, `ReplayDataset(emit_timesteps=True)`
           and Reverb's `TimestepDataset`).

Prints one JSON line: {"items": ..., "seconds": ..., "cpu": {"server": ..., "clients": ...}}
(items counted over every client, seconds the longest client's; cpu the CPU seconds, user and
system, of the server process and of all client processes together over the timed window,
null where /proc cannot tell), or {"error": "..."}. Only numpy, the backend and (for the dataset case)
TensorFlow are imported, so the script runs under either Python.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback
from typing import Optional

TABLE = "bench"
MAX_ITEMS = 100_000
MAX_TABLE_BYTES = 200_000_000  # of payload: the table's max_size is the smaller of the two
SAMPLE_BATCH = 1000  # samples per Client.sample call, unless --num-samples says otherwise
DATASET_BATCH = 32
DATASET_IN_FLIGHT = 1024  # max_in_flight_samples_per_worker of both datasets, unless --in-flight

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import_backend(backend: str):
    if backend == "replay":
        sys.path.insert(0, _ROOT)
        import replay

        return replay
    if backend == "replay.reverb":
        sys.path.insert(0, _ROOT)
        import replay.reverb

        return replay.reverb
    import reverb

    return reverb


def _fill_count(payload_bytes: int) -> int:
    return 10_000 if payload_bytes <= 4_000 else 1_000 if payload_bytes <= 40_000 else 200


def _max_size(payload_bytes: int) -> int:
    return min(MAX_ITEMS, MAX_TABLE_BYTES // max(payload_bytes, 1))


def _payloads(payload_bytes: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.random(payload_bytes // 4, dtype=np.float32) for _ in range(16)]


# -- server ------------------------------------------------------------------------------------


def _serve(backend: str, payload_bytes: int, port_queue, stop_event) -> None:
    lib = _import_backend("replay" if backend == "replay.reverb" else backend)
    max_size = _max_size(payload_bytes)
    if backend.startswith("replay"):
        table = lib.Table(TABLE, lib.Uniform(), lib.Fifo(), max_size, lib.MinSize(1))
        server = lib.Server([table])
    else:
        table = lib.Table(TABLE, sampler=lib.selectors.Uniform(), remover=lib.selectors.Fifo(),
                          max_size=max_size, rate_limiter=lib.rate_limiters.MinSize(1))
        server = lib.Server(tables=[table])
    port_queue.put(server.port)
    stop_event.wait()
    server.stop()


def _client(lib, address: str):
    return lib.Client(address)


def _writer(client):
    return client.trajectory_writer(num_keep_alive_refs=1)


def _write(writer, data, count: int) -> None:
    for i in range(count):
        writer.append(data[i % len(data)])
        writer.create_item(TABLE, 1.0, writer.history[-1])


# -- client processes ------------------------------------------------------------------------


def _insert_worker(backend, address, payload_bytes, seconds, barrier, results, seed) -> None:
    try:
        lib = _import_backend(backend)
        data = _payloads(payload_bytes, seed)
        writer = _writer(_client(lib, address))
        _write(writer, data, 1)  # opens the stream outside the timing
        writer.flush()
        barrier.wait()
        cpu_start, start = time.process_time(), time.perf_counter()
        count = 0
        while True:
            for array in data:
                writer.append(array)
                writer.create_item(TABLE, 1.0, writer.history[-1])
            count += len(data)
            if time.perf_counter() - start >= seconds:
                break
        writer.flush()
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        writer.close()
        results.put((count, elapsed, cpu, None))
    except BaseException:  # noqa: BLE001 - reported by the parent
        results.put((0, 0.0, 0.0, traceback.format_exc()))
        barrier.abort()


def _sample_worker(backend, address, seconds, barrier, results, in_flight, num_samples) -> None:
    try:
        lib = _import_backend(backend)
        client = _client(lib, address)
        if backend == "replay" and in_flight is not None:
            def sample(n):
                return client.sample(TABLE, n, max_in_flight_samples=in_flight)
        else:
            def sample(n):
                return client.sample(TABLE, n)
        for _ in sample(1):  # connects (and reads the signature) outside the timing
            pass
        barrier.wait()
        cpu_start, start = time.process_time(), time.perf_counter()
        count = 0
        while time.perf_counter() - start < seconds:
            for _ in sample(num_samples):
                count += 1
        results.put((count, time.perf_counter() - start, time.process_time() - cpu_start, None))
    except BaseException:  # noqa: BLE001 - reported by the parent
        results.put((0, 0.0, 0.0, traceback.format_exc()))
        barrier.abort()


def _dataset_worker(backend, address, payload_bytes, seconds, barrier, results, in_flight,
                    timesteps) -> None:
    try:
        import tensorflow as tf

        lib = _import_backend(backend)
        shape = [payload_bytes // 4]
        if backend == "replay":
            from replay.dataset import ReplayDataset

            dataset = ReplayDataset(address, TABLE, dtypes=tf.float32, shapes=shape,
                                    max_in_flight_samples_per_worker=in_flight, emit_timesteps=timesteps)
        else:
            kind = lib.TimestepDataset if timesteps else lib.TrajectoryDataset
            dataset = kind(address, TABLE, dtypes=tf.float32, shapes=tf.TensorShape(shape),
                           max_in_flight_samples_per_worker=in_flight)
        iterator = iter(dataset.batch(DATASET_BATCH))
        for _ in range(20):  # streams open and tf.data threads start outside the timing
            next(iterator)
        barrier.wait()
        cpu_start, start = time.process_time(), time.perf_counter()
        count = 0
        while time.perf_counter() - start < seconds:
            count += int(next(iterator).info.key.shape[0])
        results.put((count, time.perf_counter() - start, time.process_time() - cpu_start, None))
    except BaseException:  # noqa: BLE001 - reported by the parent
        results.put((0, 0.0, 0.0, traceback.format_exc()))
        barrier.abort()


def _fill(backend, address, payload_bytes, done) -> None:
    lib = _import_backend(backend)
    writer = _writer(_client(lib, address))
    _write(writer, _payloads(payload_bytes, 0), _fill_count(payload_bytes))
    writer.flush()
    writer.close()
    done.put(True)


def run(backend: str, case: str, payload_bytes: int, num_clients: int, seconds: float,
        sample_in_flight: Optional[int] = None, num_samples: int = SAMPLE_BATCH,
        in_flight: int = DATASET_IN_FLIGHT, timesteps: bool = False) -> dict:
    """Runs one case in fresh processes: {"items", "seconds"} or {"error"}."""
    ctx = mp.get_context("spawn")
    port_queue, stop_event = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(backend, payload_bytes, port_queue, stop_event), daemon=True)
    server.start()
    processes = []
    try:
        address = f"localhost:{port_queue.get(timeout=120)}"
        if case != "insert":
            done = ctx.Queue()
            filler = ctx.Process(target=_fill, args=(backend, address, payload_bytes, done), daemon=True)
            filler.start()
            done.get(timeout=300)
            filler.join(timeout=60)
        # this process passes the barrier with the clients, to read the server's CPU time then
        barrier, results = ctx.Barrier(num_clients + 1), ctx.Queue()
        for i in range(num_clients):
            if case == "insert":
                args = (backend, address, payload_bytes, seconds, barrier, results, i + 1)
                target = _insert_worker
            elif case == "sample":
                args = (backend, address, seconds, barrier, results, sample_in_flight, num_samples)
                target = _sample_worker
            else:
                args = (backend, address, payload_bytes, seconds, barrier, results, in_flight, timesteps)
                target = _dataset_worker
            processes.append(ctx.Process(target=target, args=args, daemon=True))
        for p in processes:
            p.start()
        try:
            barrier.wait(timeout=seconds * 10 + 300)
        except threading.BrokenBarrierError:
            pass  # a client failed: its error comes with the results
        server_cpu_start = _cpu_seconds(server.pid)
        outcomes = [results.get(timeout=seconds * 10 + 300) for _ in processes]
        server_cpu_end = _cpu_seconds(server.pid)
        for p in processes:
            p.join(timeout=60)
    finally:
        for p in processes:
            if p.is_alive():
                p.kill()
        stop_event.set()
        server.join(timeout=30)
        if server.is_alive():
            server.kill()
    failures = [error for _, _, _, error in outcomes if error]
    if failures:
        return {"error": failures[0]}
    server_cpu = (None if server_cpu_start is None or server_cpu_end is None
                  else server_cpu_end - server_cpu_start)
    return {"items": sum(c for c, _, _, _ in outcomes), "seconds": max(e for _, e, _, _ in outcomes),
            "cpu": {"server": server_cpu, "clients": sum(cpu for _, _, cpu, _ in outcomes)}}


def _cpu_seconds(pid: int):
    """User plus system CPU seconds of process `pid` so far (all its threads), from /proc; None
    where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["replay", "reverb", "replay.reverb"], required=True)
    parser.add_argument("--case", choices=["insert", "sample", "dataset"], required=True)
    parser.add_argument("--payload", type=int, required=True, help="bytes per item")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sample-in-flight", type=int, default=None,
                        help="samples the replay backend keeps requested ahead in the sample case "
                             "(default: Client.sample's own default; Reverb's Client.sample keeps 1)")
    parser.add_argument("--num-samples", type=int, default=SAMPLE_BATCH,
                        help="num_samples of each Client.sample call in the sample case")
    parser.add_argument("--in-flight", type=int, default=DATASET_IN_FLIGHT,
                        help="max_in_flight_samples_per_worker of the dataset case")
    parser.add_argument("--timesteps", action="store_true",
                        help="the dataset case reads steps (TimestepDataset) instead of items")
    args = parser.parse_args(argv)
    try:
        result = run(args.backend, args.case, args.payload, args.clients, args.seconds,
                     args.sample_in_flight, args.num_samples, args.in_flight, args.timesteps)
    except BaseException:  # noqa: BLE001 - reported by the parent
        result = {"error": traceback.format_exc()}
    print(json.dumps(result), flush=True)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
