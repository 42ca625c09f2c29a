"""Env creation and validation: registry, unknown ids, malformed envs, NaN observations, actions."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.env import (EnvContext, MultiAgentEnv, check_actions_in_space, check_env,
                      check_observations_finite, make_multi_agent, register_env,
                      resolve_env_creator)
from tfrl import errors


def test_gymnasium_id_resolves_and_makes_the_env():
    creator = resolve_env_creator("CartPole-v1")
    env = creator({})
    assert env.spec.id == "CartPole-v1"
    assert creator.name == "CartPole-v1"


def test_unknown_env_id_fails_before_any_env_is_made_and_names_the_id():
    with pytest.raises(errors.UnknownEnvError, match="NoSuchEnv-v0"):
        resolve_env_creator("NoSuchEnv-v0")


def test_registered_name_wins_and_receives_env_config_with_indices():
    seen = {}

    def creator(env_config):
        seen.update(env_config)
        seen["worker_index"] = getattr(env_config, "worker_index", None)
        return gym.make("CartPole-v1", max_episode_steps=env_config["horizon"])

    register_env("short-cartpole", creator)
    env = resolve_env_creator("short-cartpole")(EnvContext({"horizon": 7}, worker_index=3))
    assert seen == {"horizon": 7, "worker_index": 3}
    assert env.spec.max_episode_steps == 7


def test_register_env_rejects_non_callables():
    with pytest.raises(errors.InvalidConfigError, match="callable"):
        register_env("broken", 42)


def test_check_env_rejects_objects_without_spaces():
    class NoSpaces:
        def reset(self, seed=None):
            return 0, {}

        def step(self, action):
            return 0, 0.0, False, False, {}

    with pytest.raises(errors.InvalidEnvError, match="observation space"):
        check_env(NoSpaces(), "no-spaces")
    with pytest.raises(errors.InvalidEnvError, match="no reset"):
        check_env(object(), "nothing")


def test_nan_observation_is_reported_with_env_name_and_index():
    obs = np.zeros((3, 4), np.float32)
    check_observations_finite(obs, "ok-env", "after step()")
    obs[2, 1] = np.nan
    with pytest.raises(errors.InvalidObservationError, match=r"'nan-env'.*\[2, 1\].*after step"):
        check_observations_finite(obs, "nan-env", "after step()")
    with pytest.raises(errors.InvalidObservationError):
        check_observations_finite({"a": np.array([[np.inf]])}, "dict-env", "after reset()")


def test_actions_outside_discrete_and_box_spaces_are_rejected():
    check_actions_in_space(np.array([0, 1, 1]), gym.spaces.Discrete(2), "e")
    with pytest.raises(errors.ActionOutOfSpaceError, match="action 2"):
        check_actions_in_space(np.array([0, 2]), gym.spaces.Discrete(2), "e")
    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    check_actions_in_space(np.array([[0.5, -1.0]]), box, "e")
    with pytest.raises(errors.ActionOutOfSpaceError, match="clip_actions"):
        check_actions_in_space(np.array([[0.5, 0.2], [1.5, 0.0]]), box, "e")


def test_nested_actions_are_checked_leaf_by_leaf_and_box_leaves_clipped():
    from tfrl.rollout.action_adapter import ActionAdapter

    space = gym.spaces.Dict({"a": gym.spaces.Tuple([gym.spaces.Box(-10.0, 10.0, ()),
                                                     gym.spaces.Discrete(2)]),
                             "b": gym.spaces.Box(-1.0, 1.0, (2,))})
    actions = {"a": (np.array([3.0, -12.0], np.float32), np.array([1, 0])),
               "b": np.array([[0.5, 2.0], [0.0, -0.3]], np.float32)}
    with pytest.raises(errors.ActionOutOfSpaceError, match="clip_actions"):
        check_actions_in_space(actions, space, "e")
    bad_discrete = {"a": (np.zeros(2, np.float32), np.array([0, 2])), "b": np.zeros((2, 2))}
    with pytest.raises(errors.ActionOutOfSpaceError, match="action 2"):
        check_actions_in_space(bad_discrete, space, "e")

    adapter = ActionAdapter(space, "e", clip_actions=True)
    clipped = adapter(actions)  # checked after clipping: no error
    np.testing.assert_array_equal(clipped["a"][0], [3.0, -10.0])
    np.testing.assert_array_equal(clipped["a"][1], [1, 0])
    np.testing.assert_array_equal(clipped["b"], np.array([[0.5, 1.0], [0.0, -0.3]], np.float32))
    row = adapter.env_action(clipped, 1)
    assert space.contains({"a": (np.asarray(row["a"][0]), row["a"][1]), "b": row["b"]})
    # the batch keeps the policy's own actions: clipping made new arrays
    assert actions["b"][0, 1] == 2.0


class TwoAgentCounter(MultiAgentEnv):
    """Agent 'a' acts every step, agent 'b' every other step; the episode lasts 4 steps."""

    def __init__(self, config=None):
        self.possible_agents = ["a", "b"]
        space = gym.spaces.Box(-10, 10, (1,), np.float32)
        self.observation_spaces = {"a": space, "b": space}
        self.action_spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": np.zeros(1, np.float32), "b": np.zeros(1, np.float32)}, {}

    def step(self, action_dict):
        self.t += 1
        obs = {"a": np.full(1, self.t, np.float32)}
        if self.t % 2 == 0:
            obs["b"] = np.full(1, self.t, np.float32)
        rewards = {"a": 1.0, "b": 2.0}
        done = self.t >= 4
        return obs, rewards, {"__all__": done}, {"__all__": False}, {}


def test_multi_agent_env_spaces_and_missing_agents():
    env = TwoAgentCounter()
    check_env(env, "counter")
    assert env.get_action_space("a") == gym.spaces.Discrete(2)
    with pytest.raises(errors.UnsupportedSpaceError, match="'c'"):
        env.get_observation_space("c")


def test_make_multi_agent_runs_independent_copies_until_all_end():
    env = make_multi_agent("CartPole-v1", 2)({})
    obs, _ = env.reset(seed=0)
    assert set(obs) == {0, 1}
    done_all = False
    steps = 0
    active = {0, 1}
    while not done_all:
        obs, rew, term, trunc, _ = env.step({i: 0 for i in active})
        for i in list(active):
            if term[i] or trunc[i]:
                active.discard(i)
        done_all = term["__all__"] or trunc["__all__"]
        steps += 1
    assert not active
    assert term["__all__"] and not trunc["__all__"]  # always pushing left ends by termination
