"""Disk-backed chunks against in-memory ones: inserts/s, samples/s and the server's peak memory.

For each store (`memory`: chunks on the heap; `disk`: `Server(chunk_dir=...)`, see
replay.disk_chunk_store; `bounded`: the same with `chunk_cache_bytes` of --chunk-cache-mb, the
most chunk bytes the server keeps mapped) a replay server runs in its own process with one Uniform/Fifo table
big enough for every item, MinSize(1). This process writes --table-mb of items of --item-bytes
random bytes each (one step per item, incompressible, so the stored chunk bytes equal the
payload) with one `Client.writer`, then samples single items for --sample-seconds with
`Client.sample` (uniform over the whole table: with the disk store, every sample reads a chunk
through the page cache). While both phases run it polls the server's /proc status every 50 ms
and reports the peak RssAnon (the heap: what the disk store bounds), RssFile (mapped segment
pages: the kernel's to reclaim; what the bounded store keeps within --chunk-cache-mb) and their
sum, and the table bytes over the peak RssAnon and over the peak sum.

Usage: python -m tools bench_disk_chunks [--table-mb 2000] [--item-bytes 40000]
       [--sample-seconds 10] [--chunk-dir DIR] [--stores memory disk bounded]
       [--chunk-cache-mb 64]
The chunk directory (default: a new temporary directory) must be on a disk, not a tmpfs.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from typing import Dict, Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TABLE = "bench"
_POLL_SECONDS = 0.05


def bench_table(max_size: int):
    """The benchmarks' table: uniform sampling, FIFO eviction, samples from the first item."""
    from replay import rate_limiters, selectors
    from replay.table import Table

    return Table(TABLE, selectors.Uniform(seed=0), selectors.Fifo(), max_size, rate_limiters.MinSize(1))


def fill(client, num_items: int, item_bytes: int) -> float:
    """Writes `num_items` one-step items of `item_bytes` random bytes (16 distinct payloads,
    incompressible) into the table; returns the seconds it took."""
    import numpy as np

    rng = np.random.default_rng(0)
    payloads = [rng.integers(0, 256, item_bytes, dtype=np.uint8) for _ in range(16)]
    start = time.perf_counter()
    with client.writer(max_sequence_length=1, chunk_length=1) as writer:
        for i in range(num_items):
            writer.append(payloads[i % len(payloads)])
            writer.create_item(TABLE, 1, 1.0)
    return time.perf_counter() - start


def _serve(port_queue, stop_event, max_size: int, chunk_dir: Optional[str],
           chunk_cache_bytes: Optional[int]) -> None:
    from replay.server import Server

    server = Server([bench_table(max_size)], chunk_dir=chunk_dir, chunk_cache_bytes=chunk_cache_bytes)
    port_queue.put(server.port)
    stop_event.wait()
    server.stop(grace=None)


def _memory_kb(pid: int) -> Dict[str, int]:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("RssAnon", "RssFile", "RssShmem"):
                fields[name] = int(value.split()[0])
    return fields


class _PeakMemory:
    """Polls a process's RssAnon/RssFile from a thread and keeps the peaks (kB)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0, "sum": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = _memory_kb(self.pid)
            for name, value in now.items():
                self.peak[name] = max(self.peak[name], value)
            self.peak["sum"] = max(self.peak["sum"], now["RssAnon"] + now["RssFile"])
            self._stop.wait(_POLL_SECONDS)

    def stop(self) -> Dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_case(store: str, table_bytes: int, item_bytes: int, sample_seconds: float,
             chunk_dir: Optional[str], chunk_cache_mb: float = 64.0) -> str:
    """One store's figures as a result line."""
    import numpy as np

    from replay.client import Client

    num_items = max(1, table_bytes // item_bytes)
    ctx = mp.get_context("spawn")
    port_queue, stop_event = ctx.Queue(), ctx.Event()
    cache_bytes = int(chunk_cache_mb * 2**20) if store == "bounded" else None
    process = ctx.Process(target=_serve, args=(port_queue, stop_event, num_items,
                                               None if store == "memory" else chunk_dir, cache_bytes))
    process.start()
    try:
        port = port_queue.get(timeout=120)
        idle = _memory_kb(process.pid)
        peak = _PeakMemory(process.pid)
        idle_sum = idle["RssAnon"] + idle["RssFile"]
        client = Client(f"localhost:{port}")
        insert_seconds = fill(client, num_items, item_bytes)
        after_insert = _memory_kb(process.pid)
        samples = 0
        start = time.perf_counter()
        while time.perf_counter() - start < sample_seconds:
            for sample in client.sample(TABLE, 256, emit_timesteps=False, timeout=30):
                if np.asarray(sample.data[0]).size != item_bytes:
                    raise RuntimeError(f"a sample of shape {np.shape(sample.data[0])}")
                samples += 1
        sample_seconds = time.perf_counter() - start
        size = client.server_info()[TABLE].current_size
        client.close()
        peaks = peak.stop()
    finally:
        stop_event.set()
        process.join(timeout=60)
        if process.is_alive():
            process.kill()
    mb = 1024.0
    return (f"store={store} items={size} table_mb={size * item_bytes / 1e6:.0f} item_bytes={item_bytes} "
            f"inserts_per_s={num_items / insert_seconds:.0f} insert_mb_per_s={table_bytes / insert_seconds / 1e6:.0f} "
            f"samples_per_s={samples / sample_seconds:.0f} "
            f"rss_anon_mb_idle={idle['RssAnon'] / mb:.0f} rss_anon_mb_after_insert={after_insert['RssAnon'] / mb:.0f} "
            f"peak_rss_anon_mb={peaks['RssAnon'] / mb:.0f} peak_rss_file_mb={peaks['RssFile'] / mb:.0f} "
            f"peak_rss_anon_plus_file_mb={peaks['sum'] / mb:.0f} (idle {idle_sum / mb:.0f}) "
            + (f"chunk_cache_mb={chunk_cache_mb:g} " if cache_bytes else "")
            + f"table_over_peak_anon={size * item_bytes / (peaks['RssAnon'] * 1024):.1f} "
            f"table_over_peak_anon_plus_file={size * item_bytes / (peaks['sum'] * 1024):.1f}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_disk_chunks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--table-mb", type=float, default=2000.0, help="chunk bytes to insert (MB)")
    parser.add_argument("--item-bytes", type=int, default=40_000, help="bytes per item (one step)")
    parser.add_argument("--sample-seconds", type=float, default=10.0, help="seconds of sampling")
    parser.add_argument("--chunk-dir", default=None,
                        help="directory for the disk store's segments (default: a temporary one)")
    parser.add_argument("--stores", nargs="+", choices=("memory", "disk", "bounded"),
                        default=["memory", "disk", "bounded"])
    parser.add_argument("--chunk-cache-mb", type=float, default=64.0,
                        help="the bounded store's chunk_cache_bytes, in MB")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-chunks-", dir=args.chunk_dir) as chunk_dir:
        for store in args.stores:
            print(run_case(store, int(args.table_mb * 1e6), args.item_bytes, args.sample_seconds, chunk_dir,
                           args.chunk_cache_mb), flush=True)
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    main()
