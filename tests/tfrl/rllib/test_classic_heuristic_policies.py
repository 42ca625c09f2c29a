"""Hand-coded policies written against classic RLlib's `Policy`: `_create_exploration()` builds
the exploration of `exploration_config` (default StochasticSampling), and a policy without
`get_weights` is never asked for weights by weight syncs (classic RLlib synced only the trained
policies; tfrl also leaves out any policy that has no weights to move)."""
import sys

import gymnasium as gym
import numpy as np
import pytest
import ray
import ray.cloudpickle

from tfrl import errors
from tfrl.policy.exploration import EpsilonGreedy, Random, StochasticSampling
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rllib.agents.pg.pg_tf_policy import PGTFPolicy
from tfrl.rllib.evaluation.rollout_worker import RolloutWorker
from tfrl.rllib.policy.policy import Policy

from tests.tfrl.rllib.test_classic_multi_agent_spaces import ACT, MODEL, OBS, SharedSpacesGame, by_agent

pytestmark = pytest.mark.timeout(300)

# the trainer's remote worker builds this module's policy: Ray ships it by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class RandomHeuristic(Policy):
    """As classic RLlib's examples' RandomPolicy: acts at random, learns nothing, and has no
    get_weights / set_weights."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.exploration = self._create_exploration()

    def compute_actions(self, obs_batch, state_batches=None, prev_action_batch=None,
                        prev_reward_batch=None, **kwargs):
        return [self.action_space.sample() for _ in obs_batch], [], {}

    def learn_on_batch(self, samples):
        return {}


def test_create_exploration_defaults_to_stochastic_sampling():
    policy = RandomHeuristic(OBS, ACT, {})
    assert type(policy.exploration) is StochasticSampling
    assert policy.exploration.action_space == ACT
    assert policy.exploration.framework == "tf"
    assert policy._create_exploration() is policy.exploration  # built once
    actions = np.array([0, 1, 1])
    assert policy.exploration.get_exploration_action(actions) is actions


def test_create_exploration_follows_the_exploration_config():
    config = {"exploration_config": {"type": "EpsilonGreedy", "initial_epsilon": 1.0,
                                     "final_epsilon": 1.0, "epsilon_timesteps": 0},
              "num_workers": 3, "worker_index": 2}
    exploration = RandomHeuristic(OBS, gym.spaces.Discrete(50), config).exploration
    assert isinstance(exploration, EpsilonGreedy)
    assert (exploration.num_workers, exploration.worker_index) == (3, 2)
    greedy = np.zeros(200, np.int64)
    assert np.array_equal(exploration.get_exploration_action(greedy, explore=False), greedy)
    explored = exploration.get_exploration_action(greedy, timestep=10)
    assert np.count_nonzero(explored) > 150  # epsilon 1: random among 50 actions
    assert exploration.get_info() == {"cur_epsilon": 1.0}
    # DQN's own exploration_config names no type: its epsilon keys mean EpsilonGreedy
    dqn_like = {"exploration_config": {"initial_epsilon": 1.0, "final_epsilon": 0.1,
                                       "epsilon_timesteps": 100}}
    assert isinstance(RandomHeuristic(OBS, ACT, dqn_like).exploration, EpsilonGreedy)
    assert isinstance(RandomHeuristic(OBS, ACT, {"exploration_config": {"type": Random}})
                      .exploration, Random)


@pytest.mark.parametrize("exploration_config", [
    {"type": "NoSuchExploration"}, {"type": dict},
    {"type": "StochasticSampling", "no_such_key": 1},
    {"type": "EpsilonGreedy", "initial_epsilon": 2.0},
])
def test_a_malformed_exploration_config_is_a_named_error(exploration_config):
    with pytest.raises(errors.InvalidConfigError, match="exploration_config"):
        RandomHeuristic(OBS, ACT, {"exploration_config": exploration_config})


def test_weight_syncs_leave_out_a_policy_without_get_weights():
    worker = RolloutWorker(SharedSpacesGame, {"px": (PGTFPolicy, OBS, ACT, {}),
                                              "py": (RandomHeuristic, OBS, ACT, {})},
                           {"rollout_fragment_length": 6, "model": MODEL},
                           policy_mapping_fn=by_agent)
    assert list(worker.get_movable_weights()) == ["px"]
    assert list(worker.get_movable_weights(["px", "py"])) == ["px"]
    with pytest.raises(NotImplementedError):  # asked by name, as classic RLlib
        worker.get_weights(["py"])


def test_a_trainer_with_an_untrained_heuristic_policy_without_weights_trains(ray_session):
    config = {"env": SharedSpacesGame, "num_workers": 1, "rollout_fragment_length": 6,
              "train_batch_size": 12, "model": MODEL,
              "multiagent": {"policies": {"px": (None, OBS, ACT, {}),
                                          "py": (RandomHeuristic, OBS, ACT, {})},
                             "policy_mapping_fn": by_agent,
                             "policies_to_train": ["px"]}}
    with PGTrainer(config=config) as trainer:
        before = trainer.get_policy("px").get_weights()
        result = trainer.train()
        local = trainer.workers.local_worker()
        after = local.get_policy("px").get_weights()
        assert any(not np.allclose(b, a) for b, a in zip(before, after))  # px learned
        trainer.workers.sync_weights()
        remote = ray.get(trainer.workers.remote_workers()[0].get_weights.remote(["px"]))["px"]
        assert all(np.array_equal(a, r) for a, r in zip(after, remote))
    assert result["timesteps_total"] >= 12
    assert set(result["policy_reward_mean"]) <= {"px", "py"}


DISCRETE = gym.spaces.Discrete(3)
NESTED = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(-1.0, 1.0, (2,))})


class DiscreteGame(SharedSpacesGame):
    """SharedSpacesGame with `Discrete(3)` observations (the step) for "x" and a `Dict` one for
    "y" ({"a": step parity, "b": [step, -step] / 2}), as RockPaperScissors' raw integers."""

    observation_spaces = {"x": DISCRETE, "y": NESTED}
    action_spaces = {"x": ACT, "y": ACT}
    possible_agents = ["x", "y"]

    def _obs(self):
        t = min(self.t, 2)
        return {"x": t, "y": {"a": t % 2, "b": np.array([t, -t], np.float32) / 2}}

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = super().step(action_dict)
        return self._obs(), rewards, terminateds, truncateds, infos


class RecordingHeuristic(RandomHeuristic):
    """Records every observation batch it is handed (BeatLastHeuristic reads one-hot rows)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def compute_actions(self, obs_batch, *args, **kwargs):
        self.seen.append(np.array(obs_batch))
        return super().compute_actions(obs_batch, *args, **kwargs)


def _worker(policies, observation_filter="NoFilter"):
    return RolloutWorker(DiscreteGame, policies,
                         {"rollout_fragment_length": 6, "model": MODEL,
                          "observation_filter": observation_filter},
                         policy_mapping_fn=by_agent)


def test_a_hand_written_policy_gets_classic_preprocessed_observations():
    worker = _worker({"px": (RecordingHeuristic, DISCRETE, ACT, {}),
                      "py": (RecordingHeuristic, NESTED, ACT, {})})
    batch = worker.sample()
    px, py = worker.get_policy("px"), worker.get_policy("py")
    # classic RLlib built it with the preprocessor's flat Box, the env's space its original
    assert px.observation_space.shape == (3,) and px.observation_space.original_space == DISCRETE
    assert py.observation_space.shape == (4,) and py.observation_space.original_space == NESTED
    seen_x = np.concatenate(px.seen)
    assert seen_x.shape[1:] == (3,) and seen_x.dtype == np.float32
    assert np.array_equal(seen_x[:3], np.eye(3, dtype=np.float32))  # steps 0, 1, 2: one-hot
    # Dict: its parts in sorted key order, "a" one-hot then "b" as it is
    seen_y = np.concatenate(py.seen)
    assert np.allclose(seen_y[:3], [[1, 0, 0, 0], [0, 1, 0.5, -0.5], [1, 0, 1, -1]])
    # the batch holds what the policy saw
    obs_x = batch.policy_batches["px"]["obs"] if hasattr(batch, "policy_batches") else None
    assert obs_x is not None and np.asarray(obs_x).shape[1:] == (3,)


def test_a_tf_policy_keeps_raw_observations_next_to_a_hand_written_one():
    worker = _worker({"px": (PGTFPolicy, DISCRETE, ACT, {}),
                      "py": (RecordingHeuristic, NESTED, ACT, {})})
    batch = worker.sample()
    assert worker.get_policy("px").observation_space == DISCRETE
    obs_x = np.asarray(batch.policy_batches["px"]["obs"])
    assert obs_x.ndim == 1 and set(obs_x.tolist()) <= {0, 1, 2}


class SavableRecorder(RecordingHeuristic):
    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


def test_classic_preprocessing_survives_a_worker_restore_and_feeds_the_filter():
    worker = _worker({"px": (SavableRecorder, DISCRETE, ACT, {}),
                      "py": (SavableRecorder, NESTED, ACT, {})}, "MeanStdFilter")
    worker.sample()
    saved = worker.save()
    # the filter's statistics are over the preprocessed rows
    assert saved["filters"]["px"]["shape"] == [3]
    assert saved["filters"]["py"]["shape"] == [4]
    worker.restore(saved)
    px = worker.get_policy("px")
    px.seen.clear()
    worker.sample()
    assert np.concatenate(px.seen).shape[1:] == (3,)
    assert worker.filter_observation(2, "px").shape == (3,)
