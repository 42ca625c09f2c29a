"""Reverb's users' own test files, run unchanged against `replay.reverb` imported as `reverb`.

    python tools/reverb_users_tests.py [--acme ACME_CHECKOUT] [--tf-agents TF_AGENTS_CHECKOUT]
                                       [--deps DIR]

Copies the library's package out of its checkout (google-deepmind/acme, tensorflow/agents) into
a temporary directory, writes a `conftest.py` beside it that puts `replay.reverb` in place of
`reverb` (and, for TF-Agents, gymnasium in place of `gym` and `unittest.mock` in place of
`mock`), and runs the library's Reverb test files with pytest, one suite at a time. Acme's
package `__init__` is emptied: it imports the environment loop and its jax loggers, which the
adders do not use. `--deps` is a directory of the libraries' own dependencies that this
project does not install (`pip install --target DIR dm-env jax jaxlib opt_einsum gin-config`),
put on the path after the copy. Prints pytest's summary line per suite; exits 1 when a suite
failed or did not finish within its time limit (a process that hangs at exit counts).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from typing import List, Optional, Sequence

SUITES = {
    "acme": ("acme", ["acme/adders/reverb/"]),
    "tf-agents": ("tf_agents", ["tf_agents/replay_buffers/reverb_replay_buffer_test.py",
                                "tf_agents/replay_buffers/reverb_utils_test.py",
                                "tf_agents/experimental/distributed/reverb_variable_container_test.py"]),
}

_CONFTEST = """\
import sys

import replay.reverb
import replay.reverb.structured_writer  # noqa: F401 - `from reverb import structured_writer`

sys.modules["reverb"] = replay.reverb
"""

_TF_AGENTS_ALIASES = """
import unittest.mock

import gymnasium
import gymnasium.spaces
import gymnasium.wrappers

sys.modules.update({"gym": gymnasium, "gym.spaces": gymnasium.spaces,
                    "gym.wrappers": gymnasium.wrappers, "mock": unittest.mock})
"""


def run_suite(name: str, checkout: str, deps: Optional[str], timeout: float) -> bool:
    """Runs one suite; prints and returns whether it passed."""
    package, test_paths = SUITES[name]
    with tempfile.TemporaryDirectory(prefix=f"reverb-users-{name}-") as work:
        shutil.copytree(os.path.join(checkout, package), os.path.join(work, package))
        conftest = _CONFTEST + (_TF_AGENTS_ALIASES if name == "tf-agents" else "")
        with open(os.path.join(work, "conftest.py"), "w") as f:
            f.write(conftest)
        if name == "acme":
            with open(os.path.join(work, package, "__init__.py"), "w") as f:
                f.write('"""Acme, its adders only."""\n')
        path = [work] + ([deps] if deps else []) + [os.environ.get("PYTHONPATH", "")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p), TF_USE_LEGACY_KERAS="1",
                   TF_CPP_MIN_LOG_LEVEL="3")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *test_paths]
        try:
            done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"{name}: did not finish within {timeout:g} s")
            return False
        summary = [line for line in done.stdout.splitlines() if " passed" in line or " failed" in line
                   or " error" in line]
        print(f"{name}: {summary[-1] if summary else done.stdout.strip()[-400:]} (exit status {done.returncode})")
        return done.returncode == 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acme", help="a checkout of google-deepmind/acme")
    parser.add_argument("--tf-agents", help="a checkout of tensorflow/agents")
    parser.add_argument("--deps", help="a directory of the libraries' own dependencies (pip install --target)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per suite")
    args = parser.parse_args(argv)
    chosen: List[tuple] = [(name, path) for name, path in (("acme", args.acme), ("tf-agents", args.tf_agents))
                           if path]
    if not chosen:
        parser.error("give --acme and/or --tf-agents")
    results = [run_suite(name, path, args.deps, args.timeout) for name, path in chosen]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
