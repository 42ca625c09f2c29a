"""A script that trains and never calls `trainer.stop()`, or raises after `train()`, exits.

The trainer's embedded replay server serves its rollout workers' open streams (Ray actors stay
alive until Ray's own exit hook runs), which used to keep the interpreter from shutting down.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

SCRIPT = textwrap.dedent("""\
    import json, sys
    from tfrl.registry import get_trainer_class

    algo, config, ending = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    trainer = get_trainer_class(algo)(config=config, env="CartPole-v1")
    print("timesteps", trainer.train()["timesteps_total"], flush=True)
    if ending == "raise":
        raise RuntimeError("the script failed after train()")
""")


@pytest.mark.timeout(260)
def test_scripts_without_stop_exit(small_config):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("RAY_ADDRESS", None)
    cases = {"PPO forgets stop()": ("PPO", "forget"), "DQN raises after train()": ("DQN", "raise")}
    procs = {name: subprocess.Popen(
                 [sys.executable, "-c", SCRIPT, algo, json.dumps(small_config(algo)), ending],
                 cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 start_new_session=True)  # its own process group: Ray's processes included
             for name, (algo, ending) in cases.items()}
    outputs, hung = {}, []
    # generous: start-up (Ray, TensorFlow) and one iteration take most of it
    deadline = time.monotonic() + 200
    try:
        for name, proc in procs.items():
            try:
                outputs[name] = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                hung.append(name)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert not hung, f"{hung}: the process trained but did not exit"
    out, err = outputs["PPO forgets stop()"]
    assert "timesteps" in out and procs["PPO forgets stop()"].returncode == 0, err[-3000:]
    out, err = outputs["DQN raises after train()"]
    assert "timesteps" in out, err[-3000:]
    assert procs["DQN raises after train()"].returncode == 1
    assert "the script failed after train()" in err
