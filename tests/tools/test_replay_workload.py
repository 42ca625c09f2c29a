"""tools/replay_workload.py, the one implementation of the replay server workloads, on short
runs: as the Reverb comparison runs it (a script printing JSON), as bench_replay_server runs its
cases through it (the same result lines), and what it refuses."""
import json
import os
import re
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tools import bench_replay_server, replay_workload  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def test_the_script_prints_one_json_line_of_items_seconds_and_cpu():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the script finds the checkout itself, as under Reverb's Python
    result = subprocess.run([sys.executable, "tools/replay_workload.py", "--backend", "replay", "--case",
                             "insert", "--payload", "400", "--seconds", "0.3"],
                            cwd=_ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["items"] > 0 and outcome["items"] % 16 == 0  # 16 items a round
    assert outcome["seconds"] >= 0.3
    assert outcome["cpu"]["clients"] > 0


def test_each_sample_call_is_read_to_its_end_and_the_server_cpu_is_counted():
    outcome = replay_workload.run("replay", "sample", 400, 2, 0.3, num_samples=10, whole_items=True)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["items"] > 0 and outcome["items"] % 10 == 0
    assert outcome["cpu"]["server"] is not None and outcome["cpu"]["server"] > 0


def test_bench_replay_server_prints_one_line_per_case(capsys):
    assert bench_replay_server.main(["--modes", "insert", "sample_stream", "--clients", "1", "--payloads",
                                     "4000", "--duration", "0.3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for mode, line in zip(["insert", "sample_stream"], lines):
        match = re.fullmatch(rf"server {mode} +payload +4000 B  clients 1 +(\d+) items/s +([\d.]+) MB/s", line)
        assert match, line
        assert int(match.group(1)) > 0
        assert float(match.group(2)) == pytest.approx(int(match.group(1)) * 4000 / 1e6, abs=0.1)


def test_an_unknown_case_or_a_stream_from_reverb_is_refused():
    with pytest.raises(ValueError, match="unknown case 'scan'"):
        replay_workload.run("replay", "scan", 400, 1, 0.1)
    with pytest.raises(ValueError, match="replay backend's only"):
        replay_workload.sample_stream_loop("reverb", "localhost:1")


def test_importing_the_workload_imports_nothing_of_the_project_or_tensorflow():
    code = ("import sys; sys.path.insert(0, 'tools'); import replay_workload; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('replay', 'tfrl', 'tensorflow')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
