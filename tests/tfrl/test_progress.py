"""The progress rows of `tfrl train`: whole in a log file (stdout redirected), as in a terminal."""
import io
import os
import pathlib
import subprocess
import sys

from rich.console import Console

from tfrl.logging import ProgressDisplay

RESULT = {"training_iteration": 12, "episode_reward_mean": 187.25, "episode_reward_min": 9.0,
          "episode_reward_max": 500.0, "episodes_this_iter": 31, "timesteps_total": 1234567,
          "timesteps_this_iter": 8000, "time_this_iter_s": 2.0, "time_total_s": 4321.5}


def test_piped_to_a_file_every_column_of_a_row_is_written(tmp_path):
    log = tmp_path / "train.log"
    code = ("import sys; from tfrl.logging import ProgressDisplay; "
            "d = ProgressDisplay(title='PPO on CartPole-v1'); "
            f"d.update({RESULT!r}); d.update({RESULT!r})")
    with open(log, "w") as out:  # a file, as `tfrl train ... > train.log` gives it
        subprocess.run([sys.executable, "-c", code], stdout=out, check=True, timeout=120,
                       cwd=pathlib.Path(__file__).parents[2], env=dict(os.environ, COLUMNS="80"))
    lines = log.read_text().splitlines()
    assert any(line.split() == list("iter,reward,mean,reward,min/max,episodes,env,steps,steps/s,"
                                    "elapsed,s".split(",")) for line in lines), lines
    rows = [line.split() for line in lines if line.split()[:1] == ["12"]]
    assert rows == [["12", "187.2", "9/500", "31", "1234567", "4000", "4321.5"]] * 2, lines
    assert lines[0].strip() == "PPO on CartPole-v1"


def test_a_given_console_keeps_its_width():
    buffer = io.StringIO()
    display = ProgressDisplay(Console(file=buffer, width=60))
    assert display.console.width == 60
    display.update(RESULT)
    assert all(len(line) <= 60 for line in buffer.getvalue().splitlines())
