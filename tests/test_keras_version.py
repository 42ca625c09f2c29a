"""`tf.keras` after `import tfrl` or `import replay`: Keras 2 (tf_keras), what tfrl's models are
built with and Reverb's, TF-Agents' and classic RLlib's users' code expects, unless the user
chose otherwise. Each case runs in a fresh interpreter: the choice is made when TensorFlow is
first imported."""
import os
import subprocess
import sys

import pytest

PROBE = ("import sys; import {first}; import tensorflow as tf; "
         "print(tf.keras.layers.Dense.__module__.split('.')[0], 'keras' in sys.modules)")


def _keras_after(first: str, legacy_setting=None) -> list:
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    if legacy_setting is not None:
        env["TF_USE_LEGACY_KERAS"] = legacy_setting
    run = subprocess.run([sys.executable, "-c", PROBE.format(first=first)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.split()


@pytest.mark.parametrize("first", ["tfrl", "replay"])
def test_tf_keras_is_keras_2_and_keras_3_is_not_imported(first):
    assert _keras_after(first) == ["tf_keras", "False"]


def test_a_users_own_setting_wins():
    assert _keras_after("tfrl", legacy_setting="0") == ["keras", "True"]
