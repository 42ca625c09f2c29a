"""The `tfrl` command: train until a stop criterion, then rollout and export the checkpoint."""
import glob
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf


def run_tfrl(args, cwd, timeout=300):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "tfrl.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_unknown_algorithm_is_a_clear_error(tmp_path):
    done = run_tfrl(["train", "--run", "PPOO", "--env", "CartPole-v1"], cwd=tmp_path, timeout=120)
    assert done.returncode != 0
    assert "unknown algorithm 'PPOO'" in done.stderr


def test_usage_errors_and_help_keep_their_exit_codes(tmp_path):
    done = run_tfrl(["train", "--no-such-flag"], cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in done.stderr
    done = run_tfrl(["train", "--help"], cwd=tmp_path, timeout=120)
    assert done.returncode == 0
    assert "--stop" in done.stdout  # flushed before the process ends itself


STARTUP_NOISE = ("onednn", "cuda", "absl", "tf_enable_onednn_opts", "cpu_feature_guard",
                 "token authentication")


@pytest.mark.timeout(600)
def test_train_quietly_then_rollout_and_export(tmp_path, ray_session, capsys, monkeypatch):
    env = dict(os.environ)
    for name in ("TF_CPP_MIN_LOG_LEVEL", "RAY_ADDRESS"):
        env.pop(name, None)  # the defaults a user has
    command = [sys.executable, "-m", "tfrl.cli"]
    # `tfrl train`, then whether the learner's process took the replay heap policy
    train_then_report = [sys.executable, "-c", (
        "import sys, tfrl.cli, replay.heap_policy as heap; code = tfrl.cli.main(sys.argv[1:]); "
        "print('heap policy applied:', heap._applied); sys.exit(code)")]
    done = subprocess.run(
        train_then_report + ["train", "--run", "PG", "--env", "CartPole-v1", "--num-workers", "1",
                   "--config", '{"train_batch_size": 64, "rollout_fragment_length": 64, '
                               '"num_cpus_per_worker": 0, "model": {"fcnet_hiddens": [16]}}',
                   "--stop", '{"training_iteration": 2}', "--logdir", str(tmp_path / "logs"),
                   "--experiment", "smoke"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped: training_iteration=2" in done.stdout
    assert "checkpoint:" in done.stdout and "exported SavedModel:" in done.stdout
    assert "heap policy applied: True" in done.stdout
    # without --verbose, none of TensorFlow's, absl's or Ray's start-up messages
    output = (done.stdout + done.stderr).lower()
    assert not [word for word in STARTUP_NOISE if word in output], done.stderr[-3000:]
    experiment = tmp_path / "logs" / "smoke"
    assert glob.glob(str(experiment / "events.out.tfevents.*"))
    checkpoints = sorted(glob.glob(str(experiment / "checkpoints" / "checkpoint_*")))
    assert checkpoints and checkpoints[-1].endswith("checkpoint_000002")
    assert tf.saved_model.load(str(experiment / "exported_model")) is not None

    # in this process (the session's Ray): train and export already start the command as a user
    # does, and a third interpreter would only import TensorFlow once more. The quiet start-up
    # lowers TensorFlow's and absl's loggers; later tests in this process get them back as they were.
    import logging

    import tfrl.cli

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    levels = {name: logging.getLogger(name).level for name in ("tensorflow", "absl")}
    try:
        assert tfrl.cli.main(["rollout", checkpoints[-1], "--episodes", "2"]) == 0
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    rollout = capsys.readouterr().out
    assert rollout.count("episode ") == 2 and "mean return over 2 episodes" in rollout

    verbose = subprocess.run(command + ["export", checkpoints[-1], str(tmp_path / "served"), "--verbose"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "serving_default" in tf.saved_model.load(str(tmp_path / "served")).signatures
    # TensorFlow's native start-up log lines (absl's format) come through with --verbose
    assert re.search(r"^[IWE]\d{4} \d\d:\d\d:", verbose.stderr, re.MULTILINE), verbose.stderr[-3000:]


def test_experiment_files_read_exponent_floats_as_numbers(tmp_path):
    # PyYAML alone reads `1e-4` as the string "1e-4", which the typed settings refuse.
    from tfrl.cli import load_experiment_file
    from tfrl.optimizers.settings import SyncSamplesSettings

    path = tmp_path / "exp.yaml"
    path.write_text("exp:\n  run: PPO\n  config: {lr: 1e-4, train_batch_size: 2e2, quoted: '1e-4', "
                    "name: cartpole}\n")
    config = load_experiment_file(str(path))["config"]
    assert config["lr"] == pytest.approx(1e-4) and isinstance(config["lr"], float)
    assert config["train_batch_size"] == 200.0
    assert config["quoted"] == "1e-4" and config["name"] == "cartpole"
    from tfrl.agents.ppo import DEFAULT_CONFIG
    from tfrl.config import merge_config
    settings = SyncSamplesSettings.from_config(merge_config(DEFAULT_CONFIG, {"train_batch_size": 2e2}))
    assert settings.train_batch_size == 200


def test_stop_criteria_reach_into_nested_results():
    from tfrl.cli import stop_reached

    result = {"training_iteration": 3, "episode_reward_mean": float("nan"),
              "evaluation": {"episode_reward_mean": 460.0}}
    assert stop_reached(result, {"evaluation/episode_reward_mean": 450}) == \
        "evaluation/episode_reward_mean=460 >= 450"
    assert stop_reached(result, {"evaluation/episode_reward_mean": 470,
                                 "episode_reward_mean": 1, "evaluation/missing": 0}) is None
