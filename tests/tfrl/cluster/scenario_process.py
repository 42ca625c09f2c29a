"""Runs a cluster scenario (multinode_scenario.py, shard_loss_scenario.py) in a process group of
its own and kills the whole group when it ends or overruns: the scenario's Ray cluster (GCS,
raylets, workers) must not outlive it, or later `ray.init()` calls on the machine would find it."""
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run_scenario(module: str, out_path, timeout: float) -> subprocess.CompletedProcess:
    """Runs `python -m module out_path`; returns its CompletedProcess (stdout, stderr as text).

    Raises subprocess.TimeoutExpired (with the output so far) when it runs past `timeout` s."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("RAY_ADDRESS", None)  # a cluster of its own: the session's Ray does not leak in
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
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
