"""Tuple observations given as lists, as classic gym envs gave them (Ray 1.0's windy maze:
`[[x, y], wind]` for `Tuple(Box(2), Discrete(4))`): the runners put each row in its space's
structure, as classic RLlib's preprocessors read such lists, for one agent and for several."""
import gymnasium as gym
import numpy as np
from rollout_test_policies import PGPolicy

from tfrl.env import MultiAgentEnv
from tfrl.rollout import RolloutWorker

MAZE_OBS = gym.spaces.Tuple([gym.spaces.Box(0, 100, (2,), np.float32), gym.spaces.Discrete(4)])
GOAL_OBS = gym.spaces.Tuple([MAZE_OBS, gym.spaces.Discrete(4)])


class ListMaze(gym.Env):
    """Walks right one cell per step for 4 steps; the observation is a list."""

    observation_space = MAZE_OBS
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        self.x = 0
        return [[self.x, 1], self.x % 4], {}

    def step(self, action):
        self.x += 1
        return [[self.x, 1], self.x % 4], float(action), self.x >= 4, False, {}


class TwoLevelListMaze(MultiAgentEnv):
    """A high-level agent sees the maze's list; a low-level one sees `[maze list, goal]`."""

    def __init__(self, config=None):
        super().__init__()

    def reset(self, *, seed=None, options=None):
        self.x = 0
        return {"high": [[0, 1], 0], "low": [[[0, 1], 0], 2]}, {}

    def step(self, actions):
        self.x += 1
        obs = {"high": [[self.x, 1], self.x % 4], "low": [[[self.x, 1], self.x % 4], 2]}
        done = self.x >= 4
        return (obs, {a: 1.0 for a in obs}, {"__all__": done}, {"__all__": False},
                {a: {} for a in obs})


def _check_maze_rows(obs, steps):
    positions, wind = obs
    assert positions.dtype == np.float32 and positions.shape == (steps, 2)
    np.testing.assert_array_equal(positions[:, 1], 1.0)
    assert wind.shape == (steps,) and set(wind.tolist()) <= {0, 1, 2, 3}


def test_one_agent_with_list_observations_samples_tuples():
    worker = RolloutWorker(ListMaze, PGPolicy, {"rollout_fragment_length": 8})
    batch = worker.sample()
    _check_maze_rows(batch["obs"], batch.count)
    _check_maze_rows(batch["new_obs"], batch.count)
    # each row is the list's content: x counts 0..3 within each episode of 4 steps
    np.testing.assert_array_equal(batch["obs"][0][:, 0], np.tile(np.arange(4.0), batch.count // 4))


def test_agents_with_nested_list_observations_sample_their_policies_tuples():
    policies = {"high": (PGPolicy, MAZE_OBS, gym.spaces.Discrete(4), {}),
                "low": (PGPolicy, GOAL_OBS, gym.spaces.Discrete(2), {})}
    worker = RolloutWorker(TwoLevelListMaze, policies, {"rollout_fragment_length": 8},
                           policy_mapping_fn=lambda agent_id: agent_id)
    batches = worker.sample().policy_batches
    _check_maze_rows(batches["high"]["obs"], batches["high"].count)
    maze, goal = batches["low"]["obs"]
    _check_maze_rows(maze, batches["low"].count)
    np.testing.assert_array_equal(goal, 2)
