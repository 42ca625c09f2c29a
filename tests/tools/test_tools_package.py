"""tools/ as one package: `python -m tools` lists every tool (a module with a `main(argv)`), runs
one by name with its arguments, and refuses an unknown name; each tool's own command line
(`python tools/NAME.py`) keeps working."""
import ast
import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tools import __main__ as tools_main  # noqa: E402


def _tool_modules():
    """tools/*.py (and reverb_diff/run.py) that define a top-level main, by subcommand name."""
    found = {}
    for entry in os.listdir(os.path.join(_ROOT, "tools")):
        if entry.endswith(".py") and not entry.startswith("_"):
            found[entry[:-3]] = os.path.join(_ROOT, "tools", entry)
    found["reverb_diff"] = os.path.join(_ROOT, "tools", "reverb_diff", "run.py")
    mains = {}
    for name, path in found.items():
        with open(path, encoding="utf-8") as f:
            module = ast.parse(f.read())
        for node in module.body:
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                mains[name] = node
    return mains


def test_every_tool_is_a_subcommand_whose_main_takes_argv():
    mains = _tool_modules()
    assert len(mains) >= 25
    assert set(tools_main.commands()) == set(mains)
    for name, node in mains.items():
        assert [a.arg for a in node.args.args] == ["argv"], f"tools/{name}: main must take argv"
        assert len(node.args.defaults) == 1, f"tools/{name}: main's argv must default to None (sys.argv)"


def test_a_subcommand_runs_the_tool_with_its_arguments(capsys):
    status = tools_main.main(["bench_replay", "--mode", "inprocess", "--sizes", "100", "--selectors", "Fifo",
                              "--ops", "200"])
    out = capsys.readouterr().out
    assert status == 0
    assert "inprocess selector=Fifo size=100" in out


def test_an_unknown_or_missing_name_exits_2_with_the_list(capsys):
    assert tools_main.main(["no_such_tool"]) == 2
    assert "unknown tool 'no_such_tool'" in capsys.readouterr().err
    assert tools_main.main([]) == 2
    assert "bench_replay" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["-m", "tools", "compare_reverb", "--help"],
    ["tools/compare_reverb.py", "--help"],
    ["-m", "tools.compare_rllib", "--help"],
    ["tools/compare_rllib_atari.py", "--help"],
    ["tools/reverb_diff/run.py", "--help"],
])
def test_each_command_line_form_starts_a_tool(command):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the scripts find the checkout themselves
    result = subprocess.run([sys.executable, *command], cwd=_ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: ")
