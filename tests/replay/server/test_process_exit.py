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


@pytest.mark.parametrize("ending", ["pass", "raise RuntimeError('the script failed')"])
def test_a_script_that_never_stops_its_server_exits(ending):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.replace("{ending}", ending)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the process did not exit: the replay server's threads blocked its shutdown")
    assert "serving" in out, err
    if ending == "pass":
        assert proc.returncode == 0, err
    else:
        assert proc.returncode == 1 and "the script failed" in err
