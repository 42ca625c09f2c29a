"""The `replay-server` command: serve the tables a YAML file declares until SIGINT/SIGTERM.

    replay-server --config tables.yaml [--host H] [--port P] [--checkpoint-dir D]
                  [--checkpoint-every SECONDS] [--restore-timeout SECONDS]
                  [--token-file F] [--tls-cert C --tls-key K]
                  [--max-message-bytes N] [--max-sample-batch-size N]
                  [--max-concurrent-streams N] [--max-in-flight-bytes-per-stream N]
                  [--chunk-dir D [--chunk-cache-mb M]]

Prints the address and one line per table, then serves. With a checkpoint directory the
server starts from the latest complete checkpoint there (into the tables the YAML file declares,
whose settings win: `replay.checkpoint.RESTORE_RULE`), writes one every `--checkpoint-every`
seconds when asked, and writes a final one on shutdown. Exits 0 after a clean shutdown, 2 on a
bad command line or config, or when no checkpoint can be restored (corrupt, not fitting the
declared tables, or past `--restore-timeout`; the checkpoints are left as they were).
With a chunk directory the chunks' data lives in files there instead of the server's memory
(`replay.disk_chunk_store`), so tables may hold many times the memory; `--chunk-cache-mb` bounds
the chunk bytes the process keeps mapped (by default the kernel's page cache alone decides).
Its checkpoints link the chunk files (on the same filesystem; elsewhere they copy the bytes) and
a restart maps them (`replay.checkpoint_chunk_refs`).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from typing import Optional, Sequence

from replay import errors
from replay.server import (DEFAULT_MAX_CONCURRENT_STREAMS, DEFAULT_MAX_IN_FLIGHT_BYTES_PER_STREAM,
                           DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SAMPLE_BATCH_SIZE, DEFAULT_MAX_WORKERS)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replay-server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="YAML file declaring the tables")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    parser.add_argument("--checkpoint-dir", default=None, help="directory for checkpoints")
    parser.add_argument("--checkpoint-every", type=float, default=0.0,
                        help="seconds between periodic checkpoints (0: only at shutdown)")
    parser.add_argument("--restore-timeout", type=float, default=None,
                        help="seconds the start may spend restoring the latest checkpoint before it "
                             "gives up (exit 2); default: no limit")
    parser.add_argument("--chunk-dir", default=None,
                        help="directory on local disk for the chunk data (default: chunks in memory); "
                             "its files are unlinked once opened, so it looks empty")
    parser.add_argument("--chunk-cache-mb", type=float, default=None,
                        help="with --chunk-dir: the most chunk data (MB) the server keeps mapped in "
                             "its memory; the rest stays on disk and in the kernel's page cache")
    parser.add_argument("--token-file", default=None, help="file holding the shared access token")
    parser.add_argument("--tls-cert", default=None, help="PEM certificate (with --tls-key)")
    parser.add_argument("--tls-key", default=None, help="PEM private key (with --tls-cert)")
    parser.add_argument("--max-workers", type=int, default=DEFAULT_MAX_WORKERS,
                        help="threads for checkpoints and decoding very large messages (streams hold none)")
    parser.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                        help="largest message accepted or sent (default %(default)s)")
    parser.add_argument("--max-sample-batch-size", type=int, default=DEFAULT_MAX_SAMPLE_BATCH_SIZE,
                        help="most items a sampler may ask for in one response (default %(default)s)")
    parser.add_argument("--max-concurrent-streams", type=int, default=DEFAULT_MAX_CONCURRENT_STREAMS,
                        help="most insert and sample streams open at once (default %(default)s)")
    parser.add_argument("--max-in-flight-bytes-per-stream", type=int,
                        default=DEFAULT_MAX_IN_FLIGHT_BYTES_PER_STREAM,
                        help="most chunk bytes one insert stream may hold unreleased (default %(default)s)")
    parser.add_argument("--no-freeze-gc", dest="freeze_gc", action="store_false",
                        help="keep Python's default garbage collection (by default the server, alone in "
                             "its process, freezes surviving objects every second and collects fully "
                             "only once a minute; see replay.gc_freeze)")
    parser.add_argument("--no-keep-freed-heap-memory", dest="keep_freed_heap_memory",
                        action="store_false",
                        help="keep the C allocator's defaults (by default the server, alone in its "
                             "process, keeps freed heap memory for its next sample responses; see "
                             "replay.heap_policy)")
    return parser


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.InvalidArgumentError(f"cannot read the {what} {path}: {e}") from e


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from replay.checkpoint import Checkpointer
    from replay.config import load_tables
    from replay.server import Server

    try:
        if (args.tls_cert is None) != (args.tls_key is None):
            raise errors.InvalidArgumentError("--tls-cert and --tls-key go together")
        if args.checkpoint_every < 0:
            raise errors.InvalidArgumentError("--checkpoint-every must be >= 0")
        tables = load_tables(args.config)
        token = _read(args.token_file, "token file").decode().strip() if args.token_file else None
        if args.token_file and not token:
            raise errors.InvalidArgumentError(f"the token file {args.token_file} is empty")
        cert = _read(args.tls_cert, "TLS certificate") if args.tls_cert else None
        key = _read(args.tls_key, "TLS key") if args.tls_key else None
        checkpointer = (Checkpointer(args.checkpoint_dir, restore_timeout=args.restore_timeout)
                        if args.checkpoint_dir else None)
        if args.restore_timeout is not None and checkpointer is None:
            raise errors.InvalidArgumentError("--restore-timeout needs --checkpoint-dir")
        if args.chunk_cache_mb is not None and (args.chunk_dir is None or not args.chunk_cache_mb > 0):
            raise errors.InvalidArgumentError("--chunk-cache-mb needs --chunk-dir and a positive number of MB")
    except errors.ReplayError as e:
        print(f"replay-server: {e}", file=sys.stderr)
        return 2
    try:
        server = Server(tables, port=args.port, checkpointer=checkpointer, host=args.host, token=token,
                        tls_certificate=cert, tls_private_key=key, max_workers=args.max_workers,
                        max_message_bytes=args.max_message_bytes,
                        max_sample_batch_size=args.max_sample_batch_size,
                        max_concurrent_streams=args.max_concurrent_streams,
                        max_in_flight_bytes_per_stream=args.max_in_flight_bytes_per_stream,
                        freeze_gc=args.freeze_gc,
                        keep_freed_heap_memory=args.keep_freed_heap_memory,
                        chunk_dir=args.chunk_dir,
                        chunk_cache_bytes=(None if args.chunk_cache_mb is None
                                           else max(1, int(args.chunk_cache_mb * 1024 * 1024))))
    except (errors.DataLossError, errors.DeadlineExceededError) as e:
        print(f"replay-server: cannot restore the checkpoint: {e}", file=sys.stderr)
        return 2
    except errors.ReplayError as e:
        print(f"replay-server: {e}", file=sys.stderr)
        return 2

    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"replay-server listening on {args.host}:{server.port}"
          f"{' (TLS)' if cert else ''}{' (token required)' if token else ''}", flush=True)
    for table in server.tables.values():
        info = table.info()
        print(f"  table {info.name!r}: size {info.size}/{info.max_size}, sampler {info.sampler_options.options}, "
              f"remover {info.remover_options.options}, rate limiter {table.config()['rate_limiter']}", flush=True)
    print(f"  limits: max_message_bytes {server.max_message_bytes}, max_sample_batch_size "
          f"{server.max_sample_batch_size}, max_concurrent_streams {server.max_concurrent_streams}, "
          f"max_in_flight_bytes_per_stream {server.max_in_flight_bytes_per_stream}", flush=True)
    if checkpointer is not None:
        print(f"  checkpoints in {checkpointer.path}", flush=True)
    if args.chunk_dir is not None:
        bound = ("" if args.chunk_cache_mb is None
                 else f", at most {args.chunk_cache_mb:g} MB of it mapped in memory")
        print(f"  chunk data in {server.chunk_store.chunk_dir}{bound}", flush=True)

    period = args.checkpoint_every if checkpointer is not None and args.checkpoint_every > 0 else None
    next_checkpoint = time.monotonic() + period if period else None
    while not stop.wait(min(1.0, period or 1.0)):
        if next_checkpoint is not None and time.monotonic() >= next_checkpoint:
            next_checkpoint = time.monotonic() + period
            try:
                logging.info("checkpoint written to %s", server.checkpoint())
            except Exception:
                logging.exception("periodic checkpoint failed")
    # Stop serving first, so the final checkpoint holds everything that was acknowledged.
    server.stop(grace=1.0)
    status = 0
    if checkpointer is not None:
        try:
            path = server.checkpoint()
            print(f"replay-server: final checkpoint written to {path}", flush=True)
        except Exception as e:  # noqa: BLE001 - reported; the process is exiting anyway
            print(f"replay-server: final checkpoint failed: {e}", file=sys.stderr, flush=True)
            status = 1
    print("replay-server: stopped", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
