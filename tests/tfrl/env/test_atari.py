"""The Atari helper on a real ALE game: the preprocessed frames, frame stacking, and the env
names that reach it through the env registry."""
import pickle
import sys

import numpy as np
import pytest

from tfrl import errors
from tfrl.env import EnvContext, resolve_env_creator
from tfrl.env.atari import AtariEnvCreator, make_atari


def test_pong_frames_are_84x84_grayscale_uint8_stacked_four_deep_channels_last():
    env = make_atari("ALE/Pong-v5")
    assert env.observation_space.shape == (84, 84, 4)
    assert env.observation_space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    # the stack starts filled with the reset frame
    assert all(np.array_equal(obs[..., 0], obs[..., k]) for k in range(1, 4))
    previous = obs
    changed = False
    for _ in range(40):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        # the stack shifts by one frame per step: the oldest drops out, the newest is last
        np.testing.assert_array_equal(obs[..., :3], previous[..., 1:])
        changed |= not np.array_equal(obs[..., 3], previous[..., 3])
        previous = obs
    assert changed, "the newest frame never changed: the game did not advance"
    assert 0 < obs.mean() < 255  # a real picture, neither blank nor saturated
    env.close()


def test_env_config_sets_the_stack_depth_and_passes_the_rest_to_the_ale_env():
    env = make_atari("ALE/Pong-v5", {"frame_stack": 2, "screen_size": 42,
                                     "repeat_action_probability": 0.0})
    assert env.observation_space.shape == (42, 42, 2)
    assert env.unwrapped._frameskip == 1  # the preprocessing wrapper skips frames
    assert env.spec.kwargs["repeat_action_probability"] == 0.0
    env.close()


@pytest.mark.parametrize("name", ["atari:PongNoFrameskip-v4", "ALE/Pong-v5", "PongNoFrameskip-v4"])
def test_atari_names_resolve_to_the_preprocessed_env_and_pickle_for_workers(name):
    creator = pickle.loads(pickle.dumps(resolve_env_creator(name)))
    assert isinstance(creator.creator, AtariEnvCreator)
    env = creator(EnvContext({"frame_stack": 3}, worker_index=1))
    obs, _ = env.reset(seed=1)
    assert obs.shape == (84, 84, 3) and obs.dtype == np.uint8
    env.close()


def test_a_plain_gymnasium_id_is_not_preprocessed():
    assert resolve_env_creator("CartPole-v1").creator is None


@pytest.mark.parametrize("name, match", [
    ("atari:CartPole-v1", "is not an Atari env"),
    ("atari:NoSuchGame-v5", "unknown Atari env 'NoSuchGame-v5'"),
])
def test_atari_prefix_on_a_non_atari_id_is_refused_before_any_worker_starts(name, match):
    with pytest.raises(errors.UnknownEnvError, match=match):
        resolve_env_creator(name)


@pytest.mark.parametrize("key, value", [("frame_stack", 0), ("screen_size", "84"),
                                        ("noop_max", -1), ("frame_skip", True)])
def test_bad_preprocessing_settings_are_named(key, value):
    with pytest.raises(errors.InvalidConfigError, match=key):
        make_atari("ALE/Pong-v5", {key: value})


def test_without_ale_py_an_atari_name_says_which_extra_to_install(monkeypatch):
    # a missing package cannot be made real inside this environment: hide the installed one
    monkeypatch.setitem(sys.modules, "ale_py", None)
    for name in ("ALE/Pong-v5", "atari:PongNoFrameskip-v4"):
        with pytest.raises(errors.UnknownEnvError, match=r'pip install "tfrl\[atari\]"'):
            resolve_env_creator(name)
