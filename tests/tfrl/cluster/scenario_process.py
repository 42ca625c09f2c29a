"""Runs a cluster scenario (multinode_scenario.py, shard_loss_scenario.py) in a process group of
its own and kills the whole group when it ends or overruns: the scenario's Ray cluster (GCS,
raylets, workers) must not outlive it. Its Ray files live in a temporary directory of its own
(RAY_TMPDIR): `ray.cluster_utils.Cluster` records its address where a plain `ray.init()` on the
machine looks for a cluster to join, and other tests' processes must neither join it while it
runs nor find a stale address once it was killed."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run_scenario(module: str, out_path, timeout: float) -> subprocess.CompletedProcess:
    """Runs `python -m module out_path`; returns its CompletedProcess (stdout, stderr as text).

    Raises subprocess.TimeoutExpired (with the output so far) when it runs past `timeout` s."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("RAY_ADDRESS", None)  # a cluster of its own: the session's Ray does not leak in
    # short: Ray's socket paths under it must stay within the OS limit (107 bytes)
    ray_dir = env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="rc", dir="/tmp")
    proc = subprocess.Popen([sys.executable, "-m", module, str(out_path)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, output=stdout, stderr=stderr) from None
    finally:
        _kill_group(proc.pid)  # whatever of the cluster is left once the scenario has exited
        shutil.rmtree(ray_dir, ignore_errors=True)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
