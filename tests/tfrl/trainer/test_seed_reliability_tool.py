"""tools/seed_reliability.py: the stop reward it counts, when a seed stops, the count it prints,
and a real run of two seeds of a small PG example, two processes at a time."""
import importlib.util
import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_TOOL = os.path.join(_ROOT, "tools", "seed_reliability.py")


def _load_tool():
    spec = importlib.util.spec_from_file_location("seed_reliability", _TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stop_reward_is_the_one_criterion_that_is_not_a_budget():
    tool = _load_tool()
    assert tool.stop_reward({"episode_reward_mean": 450, "timesteps_total": 100000}) == (
        "episode_reward_mean", 450)
    assert tool.stop_reward({"evaluation/episode_reward_mean": -300, "training_iteration": 9}) == (
        "evaluation/episode_reward_mean", -300)
    with pytest.raises(tool.SeedReliabilityError, match="exactly one reward"):
        tool.stop_reward({"timesteps_total": 100000})
    assert tool.result_value({"evaluation": {"episode_reward_mean": -250.0}},
                             "evaluation/episode_reward_mean") == -250.0
    assert tool.result_value({"evaluation": {}}, "evaluation/episode_reward_mean") != (
        tool.result_value({"evaluation": {}}, "evaluation/episode_reward_mean"))  # NaN


def test_the_summary_counts_reached_seeds_and_crashes():
    tool = _load_tool()
    outcomes = [
        {"seed": 1, "reached": True, "why": "reached", "env_steps": 60000, "seconds": 40.0,
         "reward": 451.0, "best": 451.0, "key": "episode_reward_mean", "target": 450},
        {"seed": 2, "reached": False, "why": "env-step cap", "env_steps": 100000, "seconds": 70.0,
         "reward": 233.0, "best": 301.0, "key": "episode_reward_mean", "target": 450},
        {"seed": 3, "reached": False, "failed": True, "why": "exit 1: RuntimeError: boom"},
    ]
    assert tool.summary("cartpole-ppo", outcomes).startswith(
        "cartpole-ppo: 1 of 3 seeds reached episode_reward_mean 450 (1 crashed without a result)")
    assert tool.seed_line(outcomes[1]) == (
        "seed=2 NOT_REACHED (env-step cap) env_steps=100000 seconds=70.0 reward=233.0 best=301.0")
    assert tool.seed_line(outcomes[2]) == "seed=3 FAILED (exit 1: RuntimeError: boom)"


def _small_pg_example(tmp_path, stop_reward: float) -> str:
    path = tmp_path / f"pg-{stop_reward:g}.yaml"
    path.write_text(
        "small-pg:\n  env: CartPole-v1\n  run: PG\n"
        f"  stop:\n    episode_reward_mean: {stop_reward}\n    timesteps_total: 400\n"
        "  config:\n    num_workers: 0\n    rollout_fragment_length: 200\n"
        "    train_batch_size: 200\n    model:\n      fcnet_hiddens: [8]\n")
    return str(path)


def _run_tool(*args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=_ROOT)
    return subprocess.run([sys.executable, _TOOL, *args], capture_output=True, text=True,
                          env=env, timeout=600, check=False)


def test_a_seed_stops_at_the_stop_reward_or_the_first_cap():
    tool = _load_tool()
    assert tool.verdict(450.0, 450, 100_000, 100_000, 10.0, 300) == "reached"
    assert tool.verdict(449.9, 450, 100_000, 100_000, 10.0, 300) == "env-step cap"
    assert tool.verdict(449.9, 450, 90_000, 100_000, 300.0, 300) == "time cap"
    assert tool.verdict(449.9, 450, 90_000, 100_000, 10.0, 300) is None
    assert tool.verdict(float("nan"), -300, 90_000, 100_000, 10.0, 300) is None


@pytest.mark.timeout(660)
def test_two_seeds_two_at_a_time_in_fresh_processes(tmp_path):
    # Every CartPole episode returns at least 8.
    example = tmp_path / "small-pg.yaml"
    example.write_text(
        "small-pg:\n  env: CartPole-v1\n  run: PG\n"
        "  stop:\n    episode_reward_mean: 5\n    timesteps_total: 400\n"
        "  config:\n    num_workers: 0\n    rollout_fragment_length: 200\n"
        "    train_batch_size: 200\n    model:\n      fcnet_hiddens: [8]\n")
    run = subprocess.run([sys.executable, _TOOL, str(example), "--seeds", "2", "--first-seed", "3",
                          "--parallel", "2", "--require", "2"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=_ROOT), timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "seed=3 reached env_steps=200 " in run.stdout
    assert "seed=4 reached env_steps=200 " in run.stdout
    assert f"{example}: 2 of 2 seeds reached episode_reward_mean 5 " in run.stdout
