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

It is also the one implementation of these workloads for this project's own benchmarks:
tools/bench_replay_server.py runs its cases with backend "replay" (plus `sample_stream`, the
project's batched sampling path, which Reverb lacks), tools/bench_dataset.py reads its datasets
through `dataset_loop`/`timed` from a server of `server_process`, and tools/bench_replay.py's
extend mode writes to a `server_process`. Importing it imports nothing of `replay` or `tfrl`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Iterator, NamedTuple, Optional, Tuple

TABLE = "bench"
MAX_ITEMS = 100_000
MAX_TABLE_BYTES = 200_000_000  # of payload: the table's max_size is the smaller of the two
SAMPLE_BATCH = 1000  # samples per Client.sample call, unless --num-samples says otherwise
DATASET_BATCH = 32
DATASET_IN_FLIGHT = 1024  # max_in_flight_samples_per_worker of both datasets, unless --in-flight
DATASET_WARM_UP_BATCHES = 20
STREAM_IN_FLIGHT, STREAM_MAX_SAMPLES = 512, 2000  # the sample_stream case's Client.sample_stream
CASES = ("insert", "sample", "dataset")  # both backends; "sample_stream" is the replay backend's only

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


def fill_count(payload_bytes: int) -> int:
    """Items written into the table before a sample or dataset case."""
    return 10_000 if payload_bytes <= 4_000 else 1_000 if payload_bytes <= 40_000 else 200


def max_size(payload_bytes: int) -> int:
    """The table's max_size for items of `payload_bytes`."""
    return min(MAX_ITEMS, MAX_TABLE_BYTES // max(payload_bytes, 1))


def _payloads(payload_bytes: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.random(payload_bytes // 4, dtype=np.float32) for _ in range(16)]


# -- server ------------------------------------------------------------------------------------


def _serve(backend: str, size: int, port_queue, stop_event, signature=None) -> None:
    lib = _import_backend("replay" if backend == "replay.reverb" else backend)
    if backend.startswith("replay"):
        table = lib.Table(TABLE, lib.Uniform(), lib.Fifo(), size, lib.MinSize(1), signature=signature)
        server = lib.Server([table])
    else:
        table = lib.Table(TABLE, sampler=lib.selectors.Uniform(), remover=lib.selectors.Fifo(),
                          max_size=size, rate_limiter=lib.rate_limiters.MinSize(1), signature=signature)
        server = lib.Server(tables=[table])
    port_queue.put(server.port)
    stop_event.wait()
    server.stop()


class Served(NamedTuple):
    """A server process of `server_process`: its address and process id."""

    address: str
    pid: int


@contextlib.contextmanager
def server_process(backend: str, size: int, signature: Any = None) -> Iterator[Served]:
    """A server on loopback in a spawned process with one Uniform/Fifo table `TABLE` of
    max_size `size`, MinSize(1) and `signature` (a picklable nest of the backend's specs, or
    None); stops it on exit.

    Raises:
      queue.Empty: the server did not give its port within two minutes.
    """
    ctx = mp.get_context("spawn")
    port_queue, stop_event = ctx.Queue(), ctx.Event()
    process = ctx.Process(target=_serve, args=(backend, size, port_queue, stop_event, signature), daemon=True)
    process.start()
    try:
        yield Served(f"localhost:{port_queue.get(timeout=120)}", process.pid)
    finally:
        stop_event.set()
        process.join(timeout=30)
        if process.is_alive():
            process.kill()


def _writer(lib, address: str):
    return lib.Client(address).trajectory_writer(num_keep_alive_refs=1)


def _write(writer, data, count: int) -> None:
    for i in range(count):
        writer.append(data[i % len(data)])
        writer.create_item(TABLE, 1.0, writer.history[-1])


def _fill(backend, address, payload_bytes, count, done) -> None:
    writer = _writer(_import_backend(backend), address)
    _write(writer, _payloads(payload_bytes, 0), count)
    writer.flush()
    writer.close()
    done.put(True)


def fill(backend: str, address: str, payload_bytes: int, count: Optional[int] = None) -> None:
    """Writes `count` items (default `fill_count(payload_bytes)`) from a fresh process, as the
    insert case writes them, and returns when they are in the table.

    Raises:
      queue.Empty: the items were not written within five minutes (the filler failed).
    """
    ctx = mp.get_context("spawn")
    done = ctx.Queue()
    count = fill_count(payload_bytes) if count is None else count
    filler = ctx.Process(target=_fill, args=(backend, address, payload_bytes, count, done), daemon=True)
    filler.start()
    try:
        done.get(timeout=300)
    finally:
        filler.join(timeout=60)
        if filler.is_alive():
            filler.kill()


# -- the timed loops -------------------------------------------------------------------------------


def _nothing() -> None:
    pass


class Loop(NamedTuple):
    """One client's workload, ready to time: `step()` does one round and returns the items it
    handled, `finish()` ends the work within the timing (a flush), `close()` after it."""

    step: Callable[[], int]
    finish: Callable[[], None] = _nothing
    close: Callable[[], None] = _nothing


def timed(loop: Loop, seconds: float) -> Tuple[int, float, float]:
    """Runs `loop.step` until `seconds` have passed (at least once), then `loop.finish`:
    (items, wall seconds, CPU seconds of this process, user plus system, all threads). Then
    `loop.close`, outside the timing."""
    cpu_start, start = time.process_time(), time.perf_counter()
    count = 0
    while True:
        count += loop.step()
        if time.perf_counter() - start >= seconds:
            break
    loop.finish()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    loop.close()
    return count, elapsed, cpu


def insert_loop(backend: str, address: str, payload_bytes: int, seed: int, legacy_writer: bool = False) -> Loop:
    """The insert case's writer, its stream already open: each step writes 16 items. With
    `legacy_writer`, the legacy `Client.writer(1, chunk_length=1)` and `create_item(TABLE, 1,
    1.0)` instead of the trajectory writer."""
    data = _payloads(payload_bytes, seed)
    lib = _import_backend(backend)
    if legacy_writer:
        writer = lib.Client(address).writer(1, chunk_length=1)

        def write(count: int) -> None:
            for i in range(count):
                writer.append(data[i % len(data)])
                writer.create_item(TABLE, 1, 1.0)
    else:
        writer = _writer(lib, address)

        def write(count: int) -> None:
            _write(writer, data, count)

    write(1)  # opens the stream outside the timing
    writer.flush()

    def step() -> int:
        write(len(data))
        return len(data)

    return Loop(step, writer.flush, writer.close)


def sample_loop(backend: str, address: str, num_samples: int = SAMPLE_BATCH,
                in_flight: Optional[int] = None, whole_items: bool = False) -> Loop:
    """The sample case's client, connected: each step is one `Client.sample(TABLE,
    num_samples)` read to its end (with the replay backend and `in_flight`, that many samples
    requested ahead; with `whole_items`, `emit_timesteps=False, unpack_as_table_signature=True`:
    each sample one item rather than the list of its steps)."""
    client = _import_backend(backend).Client(address)
    options = {"max_in_flight_samples": in_flight} if backend == "replay" and in_flight is not None else {}
    if whole_items:
        options.update(emit_timesteps=False, unpack_as_table_signature=True)

    def step(n: int = num_samples) -> int:
        return sum(1 for _ in client.sample(TABLE, n, **options))

    step(1)  # connects (and reads the signature) outside the timing
    return Loop(step)


def sample_stream_loop(backend: str, address: str) -> Loop:
    """The replay backend's batched sampling path: each step is one `Client.sample_stream` of
    STREAM_MAX_SAMPLES samples with STREAM_IN_FLIGHT in flight.

    Raises:
      ValueError: `backend` is not "replay".
    """
    if backend != "replay":
        raise ValueError(f"the sample_stream case is the replay backend's only, not {backend!r}'s")
    client = _import_backend(backend).Client(address)
    for _ in client.sample(TABLE, 1):  # connects outside the timing
        pass

    def step() -> int:
        return sum(len(infos["key"]) for infos, _ in client.sample_stream(
            TABLE, max_in_flight_samples=STREAM_IN_FLIGHT, max_samples=STREAM_MAX_SAMPLES))

    return Loop(step)


def batches_loop(dataset) -> Loop:
    """Reads a batched dataset of samples, past a warm-up (streams open, tf.data threads
    start): each step is one batch and counts its items."""
    iterator = iter(dataset)
    for _ in range(DATASET_WARM_UP_BATCHES):
        next(iterator)
    return Loop(lambda: int(next(iterator).info.key.shape[0]))


def dataset_loop(backend: str, address: str, payload_bytes: int, in_flight: int = DATASET_IN_FLIGHT,
                 timesteps: bool = False, batch_size: int = DATASET_BATCH,
                 num_workers: Optional[int] = None) -> Loop:
    """The dataset case's reader: this project's `ReplayDataset` (Reverb's `TrajectoryDataset`,
    or with `timesteps` `ReplayDataset(emit_timesteps=True)` / `TimestepDataset`) of TABLE's
    float32 items, `.batch(batch_size)`, with `max_in_flight_samples_per_worker=in_flight`
    and, where given, `num_workers_per_iterator=num_workers`."""
    import tensorflow as tf

    lib = _import_backend(backend)
    shape = [payload_bytes // 4]
    options = {} if num_workers is None else {"num_workers_per_iterator": num_workers}
    if backend == "replay":
        from replay.dataset import ReplayDataset

        dataset = ReplayDataset(address, TABLE, dtypes=tf.float32, shapes=shape,
                                max_in_flight_samples_per_worker=in_flight, emit_timesteps=timesteps,
                                **options)
    else:
        kind = lib.TimestepDataset if timesteps else lib.TrajectoryDataset
        dataset = kind(address, TABLE, dtypes=tf.float32, shapes=tf.TensorShape(shape),
                       max_in_flight_samples_per_worker=in_flight, **options)
    return batches_loop(dataset.batch(batch_size))


_LOOPS = {"insert": insert_loop, "sample": sample_loop, "sample_stream": sample_stream_loop,
          "dataset": dataset_loop}


# -- client processes ------------------------------------------------------------------------


def _client_process(case, args, seconds, barrier, results) -> None:
    try:
        loop = _LOOPS[case](*args)
        barrier.wait()
        results.put((*timed(loop, seconds), None))
    except BaseException:  # noqa: BLE001 - reported by the parent
        results.put((0, 0.0, 0.0, traceback.format_exc()))
        barrier.abort()


def run(backend: str, case: str, payload_bytes: int, num_clients: int, seconds: float,
        sample_in_flight: Optional[int] = None, num_samples: int = SAMPLE_BATCH,
        in_flight: int = DATASET_IN_FLIGHT, timesteps: bool = False, *, legacy_writer: bool = False,
        whole_items: bool = False) -> dict:
    """Runs one case (CASES, or "sample_stream" with backend "replay") in fresh processes:
    {"items", "seconds", "cpu"} or {"error"}. `legacy_writer` (insert) and `whole_items`
    (sample) as `insert_loop` and `sample_loop` take them.

    Raises:
      ValueError: an unknown case.
    """
    if case not in _LOOPS:
        raise ValueError(f"unknown case {case!r}: one of {sorted(_LOOPS)}")
    ctx = mp.get_context("spawn")
    processes = []
    with server_process(backend, max_size(payload_bytes)) as server:
        try:
            if case != "insert":
                fill(backend, server.address, payload_bytes)
            # this process passes the barrier with the clients, to read the server's CPU time then
            barrier, results = ctx.Barrier(num_clients + 1), ctx.Queue()
            for i in range(num_clients):
                args = {"insert": (backend, server.address, payload_bytes, i + 1, legacy_writer),
                        "sample": (backend, server.address, num_samples, sample_in_flight, whole_items),
                        "sample_stream": (backend, server.address),
                        "dataset": (backend, server.address, payload_bytes, in_flight, timesteps)}[case]
                processes.append(ctx.Process(target=_client_process, args=(case, args, seconds, barrier, results),
                                             daemon=True))
            for p in processes:
                p.start()
            try:
                barrier.wait(timeout=seconds * 10 + 300)
            except threading.BrokenBarrierError:
                pass  # a client failed: its error comes with the results
            server_cpu_start = cpu_seconds(server.pid)
            outcomes = [results.get(timeout=seconds * 10 + 300) for _ in processes]
            server_cpu_end = cpu_seconds(server.pid)
            for p in processes:
                p.join(timeout=60)
        finally:
            for p in processes:
                if p.is_alive():
                    p.kill()
    failures = [error for _, _, _, error in outcomes if error]
    if failures:
        return {"error": failures[0]}
    server_cpu = (None if server_cpu_start is None or server_cpu_end is None
                  else server_cpu_end - server_cpu_start)
    return {"items": sum(c for c, _, _, _ in outcomes), "seconds": max(e for _, e, _, _ in outcomes),
            "cpu": {"server": server_cpu, "clients": sum(cpu for _, _, cpu, _ in outcomes)}}


def cpu_seconds(pid: int) -> Optional[float]:
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
    parser.add_argument("--case", choices=list(CASES), required=True)
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
