"""Shared test fixtures: free loopback ports, one local Ray per session, 2 logical CPU devices.

TensorFlow's CPU is split into two logical devices before TensorFlow initialises, so
multi-replica MirroredStrategy code runs on this CPU-only machine.
"""
import os
import socket

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Before TensorFlow, as a user's script imports them: their `tf.keras` choice then applies here
# and in the processes the tests start (tests/test_keras_version.py).
import replay  # noqa: E402,F401
import tfrl  # noqa: E402,F401


def _split_cpu_for_tensorflow():
    try:
        import tensorflow as tf
    except ImportError:
        return
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:
        pass  # already initialised by an earlier import; keep what it has


_split_cpu_for_tensorflow()


def pick_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def free_port():
    return pick_free_port()


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray, started once for the whole test session (once per process under
    pytest-xdist: the test command runs two).

    Six logical CPUs on the 2-core machine: enough for a Tune grid search of two trials that
    each reserve a trainer and two rollout workers of one CPU (tests/tfrl/trainer/test_tune.py).
    """
    import ray

    if not ray.is_initialized():
        # address="local": a session of its own, never a cluster another program started
        ray.init(address="local", num_cpus=6, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


_session = {}


def pytest_sessionfinish(session, exitstatus):
    _session["exitstatus"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Ends the test process as soon as pytest has reported, with pytest's exit status.

    Interpreter teardown after a full run took about three minutes: TensorFlow destroys the
    iterator resources of tf.data pipelines that traced functions still hold, and each destructor
    waits for its dataset's thread pool. Nothing the suite checks happens after this hook (Ray was
    shut down by its fixture, every server and trainer by its test). TFRL_TESTS_FULL_EXIT=1 keeps
    the ordinary interpreter exit.
    """
    if "exitstatus" not in _session or os.environ.get("TFRL_TESTS_FULL_EXIT") == "1":
        return
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_session["exitstatus"])
