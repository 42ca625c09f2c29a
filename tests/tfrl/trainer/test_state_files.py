"""The JSON + npz state files of trainer checkpoints: nested data round-trips exactly, what is not
data is refused or left out by name, and config values that cannot be stored are reported."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.pg.pg import PGTrainer
from tfrl.errors import CheckpointError
from tfrl.trainer import Trainer
from tfrl.utils.state_files import read_state, write_state


def test_nested_state_round_trips_with_types(tmp_path):
    state = {"weights": [np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros(0, np.int64)],
             "by_agent": {0: 1.5, 1: np.float32(2.5)}, "pair": (1, "two", None, True),
             "dict": {"dict": {"list": [1]}}, "nan": float("nan")}
    path = write_state(str(tmp_path / "s"), {"format": "f"}, state)
    assert path.endswith("s.json")
    document = read_state(str(tmp_path / "s"))
    restored = document["state"]
    assert document["format"] == "f"
    np.testing.assert_array_equal(restored["weights"][0], state["weights"][0])
    assert restored["weights"][0].dtype == np.float32 and restored["weights"][1].dtype == np.int64
    assert restored["by_agent"] == {0: 1.5, 1: np.float32(2.5)}
    assert type(restored["by_agent"][1]) is np.float32
    assert restored["pair"] == (1, "two", None, True)
    assert restored["dict"] == {"dict": {"list": [1]}}
    assert np.isnan(restored["nan"])


def test_objects_are_refused_by_name(tmp_path):
    with pytest.raises(CheckpointError, match=r"state.f is a function"):
        write_state(str(tmp_path / "s"), {}, {"f": lambda: 0})
    with pytest.raises(CheckpointError, match="array of Python objects"):
        write_state(str(tmp_path / "s"), {}, {"a": np.array([{}, 1], dtype=object)})


@pytest.mark.timeout(300)
def test_config_values_that_are_not_data_are_reported_not_stored(ray_session, tmp_path):
    config = {"num_workers": 0, "rollout_fragment_length": 20, "train_batch_size": 20,
              "model": {"fcnet_hiddens": [8]}}
    make_env = lambda env_config: gym.make("CartPole-v1")  # noqa: E731
    trainer = PGTrainer(config=config, env=make_env)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        state = Trainer.load_checkpoint_state(path)
        assert state["unstored_config_keys"] == ["config.env"]
        assert state["config"]["env"] is None and state["config"]["train_batch_size"] == 20
        with pytest.raises(CheckpointError, match=r"not data \(\['config.env'\]"):
            Trainer.from_checkpoint(path)
        weights = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    again = PGTrainer(config=config, env=make_env)
    try:
        again.restore(path)
        assert again.iteration == 1
        for a, b in zip(weights, again.get_policy().get_weights()):
            np.testing.assert_array_equal(a, b)
    finally:
        again.stop()
