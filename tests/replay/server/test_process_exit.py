"""A process that never stops its replay server still exits.

Python joins every thread pool's worker threads before it runs atexit callbacks; the server's
handler threads serve open streams for as long as their clients keep them open, so without the
server's exit hook a script that forgets `Server.stop()` (or raises) hangs at exit.
"""
import subprocess
import sys
import textwrap

import pytest

from tests.replay.server.conftest import REPO_ROOT

SCRIPT = textwrap.dedent("""\
    import threading
    import replay

    server = replay.Server([replay.Table.queue("written", 10), replay.Table.queue("empty", 10)])
    client = server.localhost_client()

    def wait_for_a_sample():  # blocks in the server: the table stays empty
        for _ in client.sample("empty", num_samples=1, emit_timesteps=False, unpack_as_table_signature=True):
            pass

    threading.Thread(target=wait_for_a_sample, daemon=True).start()
    writer = client.writer(max_sequence_length=1)  # an open insert stream, idle after this item
    writer.append({"x": 1})
    writer.create_item("written", num_timesteps=1, priority=1.0)
    writer.flush()
    print("serving", flush=True)
    {ending}
""")


def _run_to_exit(command, why):
    """(stdout, stderr, process) of `command` run from the repository root; the test fails,
    saying `why`, when it has not exited within 60 s."""
    proc = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the process did not exit: {why}")
    return out, err, proc


@pytest.mark.parametrize("ending", ["pass", "raise RuntimeError('the script failed')"])
def test_a_script_that_never_stops_its_server_exits(ending):
    out, err, proc = _run_to_exit([sys.executable, "-c", SCRIPT.replace("{ending}", ending)],
                                  "the replay server's threads blocked its shutdown")
    assert "serving" in out, err
    if ending == "pass":
        assert proc.returncode == 0, err
    else:
        assert proc.returncode == 1 and "the script failed" in err


CLOSED_AT_EXIT = textwrap.dedent("""\
    import gc, sys
    import replay

    client = replay.Client(sys.argv[1])
    client.insert({"x": 1.0}, {"replay": 1.0})
    stream = client.sample_stream("replay", max_in_flight_samples=4)  # a call still open at exit
    print(len(next(stream)[0]["key"]), "sampled", flush=True)
    writer = client.writer(max_sequence_length=1)  # an insert call still open at exit
    writer.append({"x": 2.0})
    writer.create_item("replay", num_timesteps=1, priority=1.0)
    writer.flush()


    class ClosesItsClient:  # as a dataset's stream does when it is finalized
        def __del__(self):
            client.close()


    def leave_garbage():
        closer = ClosesItsClient()
        closer.cycle = closer
        closer.writer = writer  # dropped without close, finalized with the cycle


    gc.set_threshold(10**9)  # the cycle waits for the interpreter's last collection
    leave_garbage()
    del writer
""")


CHECKED_AT_EXIT = textwrap.dedent("""\
    import atexit, sys

    def report():  # registered before replay's own hook, so it runs after it
        print("channel closed at exit:", client._channel is None, flush=True)

    atexit.register(report)
    import replay

    client = replay.Client(sys.argv[1])
    client.insert({"x": 1.0}, {"replay": 1.0})
    stream = client.sample_stream("replay", max_in_flight_samples=4)
    print(len(next(stream)[0]["key"]), "sampled", flush=True)
    cycle = [stream]
    cycle.append(cycle)  # the open call waits for the interpreter's last collection
    del stream, cycle
""")


def _serve(tmp_path):
    """A replay-server process with one table of 100 items; (process, address)."""
    config = tmp_path / "tables.yaml"
    config.write_text("tables:\n  - name: replay\n    sampler: {kind: Uniform}\n    remover: {kind: Fifo}\n"
                      "    max_size: 100\n    rate_limiter: {kind: MinSize, min_size_to_sample: 1}\n")
    server = subprocess.Popen([sys.executable, "-m", "replay.server_main", "--config", str(config), "--port", "0"],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in server.stdout:
        if "listening on" in line:
            return server, "localhost:" + line.split("listening on", 1)[1].split()[0].rsplit(":", 1)[1]
    server.kill()
    pytest.fail("the replay server did not start")


def test_open_channels_are_closed_at_exit_while_grpcs_threads_still_run(tmp_path):
    """An open call that the interpreter's last collection finalizes can wait forever for a
    lock a stopped gRPC thread holds (one process in three hung so on a loaded machine), so the
    channels are closed by an exit hook, before the threads stop."""
    server, address = _serve(tmp_path)
    try:
        out, err, proc = _run_to_exit([sys.executable, "-c", CHECKED_AT_EXIT, address],
                                      "an open sample call at exit hung")
        assert "sampled" in out and proc.returncode == 0, err
        assert "channel closed at exit: True" in out, out + err
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_client_closed_by_the_last_garbage_collection_lets_the_process_exit(tmp_path):
    """A stream or dataset left in a reference cycle is finalized by the interpreter's last
    collection, when gRPC's threads no longer run: closing the channel then waited forever for
    its open calls (a TF-Agents test file never exited)."""
    server, address = _serve(tmp_path)
    try:
        out, err, proc = _run_to_exit([sys.executable, "-c", CLOSED_AT_EXIT, address],
                                      "closing its client at finalization hung")
        assert "sampled" in out, err
        assert proc.returncode == 0, err
    finally:
        server.terminate()
        server.wait(timeout=30)
