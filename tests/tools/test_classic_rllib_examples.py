"""The classic-examples harness's import rules, in a real interpreter with its sitecustomize:
`tfrl.rllib.examples` is tfrl's own helper modules first, then the release's rewritten folder;
`ray.rllib` stays blocked."""
import os
import subprocess
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tools.classic_rllib_examples import prepare, rewrite, run_one  # noqa: E402

PROBE = """
import importlib
import tfrl.rllib.examples.env.multi_agent as multi_agent
import tfrl.rllib.examples.env.corridor as corridor
import tfrl.rllib.examples.models.net as net
print(multi_agent.__file__)
print(corridor.SOURCE, net.SOURCE)
try:
    importlib.import_module("ray.rllib.agents")
except ModuleNotFoundError as exc:
    print("blocked" if "blocked" in str(exc) else "not blocked")
"""


def _release(tmp_path):
    release = tmp_path / "release"
    for folder, module in (("env", "corridor"), ("env", "multi_agent"), ("models", "net")):
        (release / folder).mkdir(parents=True, exist_ok=True)
        (release / folder / "__init__.py").write_text("")
        (release / folder / f"{module}.py").write_text(
            "import gym\nfrom ray.rllib.env import MultiAgentEnv\nSOURCE = 'release'\n")
    return release


def test_tfrl_helpers_come_first_and_the_release_supplies_the_rest(tmp_path):
    target = prepare(_release(tmp_path), tmp_path / "work", gym_from_imports=True)
    assert "import gymnasium as gym" in (target / "env" / "corridor.py").read_text()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target.parent / "site"), _ROOT]))
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=target, env=env, text=True,
                         capture_output=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    module_file, sources, blocked = out.stdout.split("\n")[-4:-1]
    assert module_file == os.path.join(_ROOT, "tfrl", "rllib", "examples", "env", "multi_agent.py")
    assert sources == "release release"  # env/corridor.py and models/ come from the release
    assert blocked == "blocked"


def test_the_rewrite_is_the_one_the_readme_promises():
    assert rewrite("import gym\nfrom ray.rllib.agents import ppo\n") == \
        "import gymnasium as gym\nfrom tfrl.rllib.agents import ppo\n"
    assert rewrite("from gym.spaces import Box\n") == "from gym.spaces import Box\n"
    assert rewrite("from gym.spaces import Box\n", gym_from_imports=True) == \
        "from gymnasium.spaces import Box\n"


def test_a_script_runs_with_the_arguments_given_with_its_name(tmp_path):
    target = tmp_path / "examples"
    target.mkdir()
    (target / "stop.py").write_text(
        "import argparse, sys\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--stop', type=int, default=200)\n"
        "print('stop', parser.parse_args().stop)\n"
        "sys.exit(0 if parser.parse_args().stop == 50 else 3)\n")
    assert run_one("stop.py --stop=50", target, dict(os.environ), 60)[0] == "PASS"
    assert "stop 50" in (tmp_path / "stop.py_--stop=50.log").read_text()
    assert run_one("stop.py", target, dict(os.environ), 60)[0] == "FAIL"
    assert "stop 200" in (tmp_path / "stop.py.log").read_text()
