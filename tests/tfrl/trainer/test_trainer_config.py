"""Config merging: defaults + algorithm + user, unknown keys named with the closest valid key."""
import pytest

from tfrl import errors
from tfrl.config import merge_config


def test_user_values_override_defaults_and_nested_dicts_merge():
    defaults = {"lr": 0.1, "model": {"fcnet_hiddens": [8], "vf_share_layers": False}}
    merged = merge_config(defaults, {"lr": 0.5, "model": {"fcnet_hiddens": [4, 4]}})
    assert merged == {"lr": 0.5, "model": {"fcnet_hiddens": [4, 4], "vf_share_layers": False}}
    assert defaults["model"]["fcnet_hiddens"] == [8]  # defaults are not mutated


def test_unknown_key_names_the_closest_valid_key():
    with pytest.raises(errors.InvalidConfigError, match=r"'num_wokers'.*did you mean 'num_workers'"):
        merge_config({"num_workers": 2, "lr": 0.1}, {"num_wokers": 3})


def test_unknown_nested_key_is_reported_with_its_path():
    with pytest.raises(errors.InvalidConfigError, match=r"model\.fcnet_hidens.*fcnet_hiddens"):
        merge_config({"model": {"fcnet_hiddens": [8]}}, {"model": {"fcnet_hidens": [4]}})


def test_open_dicts_accept_new_keys():
    merged = merge_config({"env_config": {}}, {"env_config": {"anything": 1}})
    assert merged["env_config"] == {"anything": 1}


def test_trainer_rejects_a_typo_before_starting_anything():
    from tfrl.agents.ppo.ppo import PPOTrainer

    with pytest.raises(errors.InvalidConfigError, match="did you mean 'sgd_minibatch_size'"):
        PPOTrainer(config={"sgd_minibach_size": 32}, env="CartPole-v1")


def test_trainer_without_env_is_an_error():
    from tfrl.agents.pg.pg import PGTrainer

    with pytest.raises(errors.InvalidConfigError, match="no environment"):
        PGTrainer(config={})


def test_driver_tf_threads_sizes_a_fresh_tensorflow_and_reports_a_started_one():
    # A fresh interpreter: the test session's TensorFlow has long started.
    import subprocess
    import sys

    script = (
        "import tensorflow as tf\n"
        "from tfrl.runtime import configure_tf_threads\n"
        "assert configure_tf_threads(1)\n"
        "tf.constant(1.0) + 1.0\n"  # TensorFlow starts with the pools set above
        "print(tf.config.threading.get_intra_op_parallelism_threads(),"
        " tf.config.threading.get_inter_op_parallelism_threads())\n"
        "print(configure_tf_threads(1), configure_tf_threads(2), configure_tf_threads(None))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["1 1", "True False True"]


def test_classic_keys_without_effect_are_accepted_and_left_out():
    from tfrl.config import COMMON_CONFIG
    from tfrl.config.merge import CLASSIC_KEYS_WITHOUT_EFFECT, merge_config
    from tfrl.errors import InvalidConfigError

    merged = merge_config(COMMON_CONFIG, {"compress_observations": True,
                                          "log_sys_usage": True, "lr": 0.5})
    # custom_fast_model.py's IMPALA keys
    from tfrl.agents.impala import DEFAULT_CONFIG as IMPALA_CONFIG
    impala = merge_config(IMPALA_CONFIG, {"num_data_loader_buffers": 1,
                                          "num_aggregation_workers": 1, "fake_sampler": True})
    assert not {"num_data_loader_buffers", "num_aggregation_workers", "fake_sampler"} & set(impala)
    assert merged["lr"] == 0.5
    assert not set(CLASSIC_KEYS_WITHOUT_EFFECT) & set(merged)
    # an algorithm's defaults may declare such a key for itself
    declared = merge_config(COMMON_CONFIG, {"compress_observations": 1}, allow_new_keys=True)
    assert declared["compress_observations"] == 1
    from tfrl.agents.ppo import DEFAULT_CONFIG as PPO_CONFIG
    assert merge_config(PPO_CONFIG, {"simple_optimizer": True})["simple_optimizer"] is True
    # horizon is a real setting (tests/tfrl/rollout/test_horizon.py); a typo of it is refused
    assert merge_config(COMMON_CONFIG, {"horizon": 10})["horizon"] == 10
    with pytest.raises(InvalidConfigError, match="horizon"):
        merge_config(COMMON_CONFIG, {"horizont": 10})
