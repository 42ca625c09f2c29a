"""Classic `ray.rllib.utils.test_utils` on tfrl: `check` compares nests of numbers, tensors
and strings as classic RLlib's does, `framework_iterator` yields only the TensorFlow
frameworks tfrl runs and sets them into a config tfrl accepts, `check_learning_achieved` reads
a trainer's result (its Tune form is tested with the Tune run in test_classic_trainers)."""
import numpy as np
import pytest
import tensorflow as tf

from tfrl.config.merge import apply_classic_keys
from tfrl.errors import InvalidConfigError
from tfrl.rllib.utils.test_utils import check, check_learning_achieved, framework_iterator


def test_check_passes_equal_nests_of_numbers_tensors_and_strings():
    expected = {"a": [1, 2.5, np.array([0.1, 0.2], np.float32)], "b": (True, None, "x"),
                "c": np.array(["u", "v"], object)}
    actual = {"a": [1, tf.constant(2.5), tf.Variable([0.1, 0.2])], "b": (np.bool_(True), None, "x"),
              "c": np.array(["u", "v"], object)}
    check(actual, expected)
    check(np.float32(1.0) / 3, 1 / 3)  # float32 rounding is far below 5 decimals


@pytest.mark.parametrize("actual, expected, message", [
    ({"a": 1}, {"a": 1, "b": 2}, "keys differ"),
    ([1, 2], [1, 2, 3], "x has 2 items, y 3"),
    ({"a": [0.5]}, {"a": [0.6]}, "decimal"),
    (True, False, "x is True, y is False"),
    ("x", "y", "!="),
    (tf.constant([1.0, 2.0]), np.array([1.0, 2.1]), "decimal"),
])
def test_check_names_the_difference(actual, expected, message):
    with pytest.raises(AssertionError, match=message):
        check(actual, expected)


def test_check_tolerances_and_false():
    check(1.0001, 1.0, decimals=3)
    with pytest.raises(AssertionError):
        check(1.0001, 1.0, decimals=5)
    check(105.0, 100.0, rtol=0.06)
    with pytest.raises(AssertionError):
        check(105.0, 100.0, rtol=0.04)
    check(1.02, 1.0, atol=0.03)
    check(2.0, 3.0, false=True)
    check({"a": "x"}, {"a": "y"}, false=True)
    with pytest.raises(AssertionError, match="false=True wants them to differ"):
        check(np.array([1.0, 2.0]), [1.0, 2.0], false=True)


def test_framework_iterator_yields_the_tensorflow_frameworks_into_the_config():
    config, seen, timings = {"lr": 0.1}, [], {}
    for fw in framework_iterator(config, time_iterations=timings):
        assert config["framework"] == fw
        apply_classic_keys(config, "test")  # tfrl's config check accepts what it set
        seen.append(fw)
    assert seen == ["tf2", "tf"]  # "tfe" is tf2 here; torch is not installed
    assert set(timings) == {"tf2", "tf"} and all(t >= 0 for t in timings.values())
    assert list(framework_iterator(frameworks="torch")) == []
    assert list(framework_iterator(frameworks=("tfe", "tf"), session=True)) == [
        ("tf2", None), ("tf", None)]
    with pytest.raises(InvalidConfigError, match="unknown framework 'mxnet'"):
        list(framework_iterator(frameworks=["tf", "mxnet"]))


def test_check_learning_achieved_reads_a_result_and_its_evaluation(capsys):
    result = {"episode_reward_mean": 150.0, "evaluation": {"episode_reward_mean": 90.0}}
    check_learning_achieved(result, 150.0)
    assert capsys.readouterr().out.strip() == "ok"
    with pytest.raises(ValueError, match="`stop-reward` of 100.0 not reached"):
        check_learning_achieved(result, 100.0, evaluation=True)
    with pytest.raises(ValueError, match="`stop-reward`"):
        check_learning_achieved({"episode_reward_mean": float("nan")}, 0.0)
    with pytest.raises(ValueError, match="no 'episode_reward_mean'"):
        check_learning_achieved({"timesteps_total": 10}, 0.0)
