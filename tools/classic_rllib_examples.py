"""Runs a classic RLlib release's example scripts against tfrl.rllib, one line per script.

The scripts (a release's `rllib/examples` folder, e.g. unpacked from its `ray` wheel) are
rewritten only by the one rewrite the README promises, `ray.rllib` -> `tfrl.rllib` and
`import gym` -> `import gymnasium as gym`, and run each in its own process, from the rewritten
folder, with its default arguments (so to its own stop criterion) under a time limit. The
rewritten folder is importable as `tfrl.rllib.examples` (the scripts import their helper models
and envs from `ray.rllib.examples.models` / `.env`), and `import ray.rllib` is blocked, so
nothing falls back to the RLlib inside the installed `ray` wheel; Ray's workers get the same
import rules. The helper modules tfrl itself ships under `tfrl/rllib/examples` (classic library
code ported to gymnasium's API, e.g. `env.multi_agent`) are imported instead of the release's
copies, as a tfrl user's script importing them would get them.

    python -m tools classic_rllib_examples --examples RELEASE/ray/rllib/examples \
        --limit 300 [--gym-from-imports] [--tests-data DIR] [script.py ...]

`--tests-data` is the release's `rllib/tests/data` folder from its source tree (its wheel does
not ship it): it is put at `../tests/data` beside the rewritten examples, where custom_loss.py
reads `cartpole/small.json` by default.

A script may be given with arguments, as one quoted word (`"custom_keras_model.py --run=DQN
--stop=50"`, the arguments the release's own CI ran it with); without any it runs at its
defaults.

Prints `script PASS|FAIL|TIMEOUT seconds last-error-line` per script and last
`classic examples: P of N ran`; the logs stay in the printed folder.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

SITECUSTOMIZE = '''"""Import rules of the classic example runs (tools/classic_rllib_examples.py)."""
import importlib.abc
import importlib.util
import os
import sys

EXAMPLES = {examples!r}
TFRL_EXAMPLES = {tfrl_examples!r}
PACKAGE = "tfrl.rllib.examples"


class _ClassicExamples(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "ray.rllib" or fullname.startswith("ray.rllib."):
            raise ModuleNotFoundError(
                f"No module named {{fullname!r}} (blocked: the examples must run on tfrl)",
                name=fullname)
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        # tfrl's own helper modules first, then the release's (rewritten) ones
        parts = fullname.split(".")[3:]
        roots = [os.path.join(root, *parts) for root in (TFRL_EXAMPLES, EXAMPLES)]
        folders = [d for d in roots if os.path.isdir(d)]
        if folders:
            inits = [os.path.join(d, "__init__.py") for d in folders]
            init = next((i for i in inits if os.path.isfile(i)), inits[-1])
            return importlib.util.spec_from_file_location(
                fullname, init, submodule_search_locations=folders)
        for module in (r + ".py" for r in roots):
            if os.path.isfile(module):
                return importlib.util.spec_from_file_location(fullname, module)
        return None


sys.meta_path.insert(0, _ClassicExamples())
'''

# helper modules tfrl ships under tfrl.rllib.examples: imported instead of the release's
TFRL_EXAMPLES = Path(__file__).resolve().parent.parent / "tfrl" / "rllib" / "examples"

ERROR_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception|Exit)\b|^[A-Za-z_.]+Error: ")


def rewrite(source: str, gym_from_imports: bool = False) -> str:
    """The one rewrite: ray.rllib -> tfrl.rllib, `import gym` -> `import gymnasium as gym`
    (and with `gym_from_imports`, `from gym.x import` -> `from gymnasium.x import`)."""
    source = re.sub(r"\bray\.rllib\b", "tfrl.rllib", source)
    if gym_from_imports:
        source = re.sub(r"^from gym(\.| )", r"from gymnasium\1", source, flags=re.MULTILINE)
    return re.sub(r"^import gym$", "import gymnasium as gym", source, flags=re.MULTILINE)


def prepare(examples: Path, work: Path, gym_from_imports: bool = False,
            tests_data: Optional[Path] = None) -> Path:
    """The rewritten copy of `examples` under `work`, the release's test data beside it, and the
    sitecustomize folder."""
    target = work / "examples"
    if tests_data is not None:
        shutil.copytree(tests_data, work / "tests" / "data")
    shutil.copytree(examples, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in target.rglob("*.py"):
        path.write_text(rewrite(path.read_text(), gym_from_imports))
    (target / "__init__.py").touch()
    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(
        examples=str(target), tfrl_examples=str(TFRL_EXAMPLES)))
    return target


def run_one(script: str, target: Path, env: dict, limit: float) -> tuple:
    """Runs `script` (a file name, optionally followed by its arguments) in `target`."""
    command = shlex.split(script)
    log = target.parent / (re.sub(r"[^\w.=-]+", "_", " ".join(command)) + ".log")
    started = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable] + command, cwd=target, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            # the script's whole session (Ray's processes too), by its group id
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(1)
            process.wait()
    seconds = time.monotonic() - started
    lines = [line for line in log.read_text(errors="replace").splitlines()
             if ERROR_LINE.search(line)]
    last = lines[-1][:160] if lines else "-"
    status = "PASS" if rc == 0 else "TIMEOUT" if rc is None else "FAIL"
    return status, seconds, "-" if status == "PASS" else last


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, required=True,
                        help="a classic release's rllib/examples folder")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds per script")
    parser.add_argument("--gym-from-imports", action="store_true",
                        help="also rewrite `from gym...` imports to gymnasium (a second change)")
    parser.add_argument("--tests-data", type=Path,
                        help="the release's rllib/tests/data folder (its source tree's)")
    parser.add_argument("scripts", nargs="*",
                        help="script names, each optionally with its arguments in one quoted word "
                             "(default: every *.py at its defaults)")
    args = parser.parse_args(argv)
    project = Path(__file__).resolve().parent.parent
    work = Path(tempfile.mkdtemp(prefix="classic-examples."))
    target = prepare(args.examples, work, args.gym_from_imports, args.tests_data)
    scripts = args.scripts or sorted(p.name for p in target.glob("*.py")
                                     if p.name != "__init__.py")
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3", RAY_DEDUP_LOGS="0")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(work / "site"), str(project)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                              else []))
    passed = 0
    for script in scripts:
        status, seconds, last = run_one(script, target, env, args.limit)
        passed += status == "PASS"
        print(f"{script} {status} {seconds:.0f}s {last}", flush=True)
    print(f"logs: {work}")
    print(f"classic examples: {passed} of {len(scripts)} ran")


if __name__ == "__main__":
    main()
