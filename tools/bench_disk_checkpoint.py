"""Checkpoints of a disk-backed table: save and restore time, copying the chunk bytes or linking the files.

A replay server with a chunk directory (`Server(chunk_dir=...)`, replay.disk_chunk_store) runs in
this process with one Uniform/Fifo table; --table-mb of items of --item-bytes incompressible
bytes each (one step per item) are written into it. Then, per format, a checkpoint is saved
(`copying`: version 2, the chunk bytes copied into chunks.bin; `referencing`: version 3, the
segment files linked, replay.checkpoint_chunk_refs), the server stops, and a new server with a
chunk directory restores it. Reported per format: the save's and the restore's seconds, the
bytes this process passed to write calls meanwhile (/proc/self/io wchar), and the disk space the
checkpoint's own files take (its linked chunk files are the segments: not counted). Both
restores check every column's CRC32; the page cache holds the data (written moments before),
so a restore after a reboot reads it from disk first.

Usage: python -m tools bench_disk_checkpoint [--table-mb 1000] [--item-bytes 100000]
       [--dir DIR] [--formats copying referencing]
The directory (default: a new temporary one) holds the chunk directory and the checkpoints; it
must be on a disk, not a tmpfs.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Optional, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools.bench_disk_chunks import TABLE, bench_table, fill  # noqa: E402


def _written() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("wchar:")).split()[1])


def _own_bytes(path: str) -> int:
    """Disk space of the checkpoint's files, its linked chunk files left out."""
    from replay.checkpoint_files import CHUNK_FILE_PREFIX

    return sum(os.stat(os.path.join(path, name)).st_blocks * 512 for name in os.listdir(path)
               if not name.startswith(CHUNK_FILE_PREFIX))


def run_case(fmt: str, table_bytes: int, item_bytes: int, directory: str) -> str:
    """One format's figures as a result line."""
    import numpy as np

    from replay.checkpoint import Checkpointer
    from replay.server import Server

    num_items = max(1, table_bytes // item_bytes)
    chunk_dir = os.path.join(directory, f"chunks-{fmt}")
    os.makedirs(chunk_dir)
    checkpoints = os.path.join(directory, f"checkpoints-{fmt}")
    server = Server([bench_table(num_items)], chunk_dir=chunk_dir)
    try:
        client = server.localhost_client()
        insert_seconds = fill(client, num_items, item_bytes)
        client.close()
        written, start = _written(), time.perf_counter()
        path = Checkpointer(checkpoints).save(list(server.tables.values()),
                                              reference_chunk_files=fmt == "referencing")
        save_seconds, save_written = time.perf_counter() - start, _written() - written
    finally:
        server.stop(grace=None)
    del server
    written, start = _written(), time.perf_counter()
    restored = Server([bench_table(num_items)], chunk_dir=chunk_dir, checkpointer=Checkpointer(checkpoints))
    restore_seconds, restore_written = time.perf_counter() - start, _written() - written
    try:
        size = restored.tables[TABLE].size
        sample = next(iter(restored.localhost_client().sample(TABLE, 1, emit_timesteps=False, timeout=30)))
        if np.asarray(sample.data[0]).size != item_bytes:
            raise RuntimeError(f"a sample of shape {np.shape(sample.data[0])}")
    finally:
        restored.stop(grace=None)
    mb = 1e6
    return (f"format={fmt} items={size} table_mb={size * item_bytes / mb:.0f} item_bytes={item_bytes} "
            f"insert_s={insert_seconds:.2f} save_s={save_seconds:.2f} save_written_mb={save_written / mb:.1f} "
            f"checkpoint_own_mb={_own_bytes(path) / mb:.1f} restore_s={restore_seconds:.2f} "
            f"restore_written_mb={restore_written / mb:.1f}")


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_disk_checkpoint", description=__doc__.split("\n\n")[0])
    parser.add_argument("--table-mb", type=float, default=1000.0, help="chunk bytes to insert (MB)")
    parser.add_argument("--item-bytes", type=int, default=100_000, help="bytes per item (one step)")
    parser.add_argument("--dir", default=None,
                        help="directory for the chunk directories and checkpoints (default: a temporary one)")
    parser.add_argument("--formats", nargs="+", choices=("copying", "referencing"),
                        default=["copying", "referencing"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-", dir=args.dir) as directory:
        for fmt in args.formats:
            print(run_case(fmt, int(args.table_mb * 1e6), args.item_bytes, directory), flush=True)
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    main()
