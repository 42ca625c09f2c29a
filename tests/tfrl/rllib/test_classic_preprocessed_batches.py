"""A TF policy with a classic custom model on a Discrete / Dict / Tuple observation space gets
classic RLlib's preprocessed observations (one-hot Discrete, flattened Dict / Tuple rows) in its
rows, postprocessing and loss, as centralized_critic.py and centralized_critic_2.py read them;
tfrl's own models keep raw observations. Also classic `other_agent_batches` ((policy, batch)
pairs), `multiagent.observation_fn`, and replay signatures of postprocessing functions that
need other agents' batches. Real policies, gymnasium envs and rollout workers."""
import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
import tree

from tfrl.env import MultiAgentEnv
from tfrl.errors import UnsupportedSpaceError
from tfrl.models.preprocessors import (classic_restored_obs, classic_unflattened_obs,
                                       get_preprocessor)
from tfrl.models.repeated_values import RepeatedValues
from tfrl.rllib.agents.ppo import DEFAULT_CONFIG as PPO_CONFIG
from tfrl.rllib.agents.ppo.ppo_tf_policy import PPOTFPolicy, postprocess_ppo_gae
from tfrl.rllib.evaluation import RolloutWorker
from tfrl.rllib.models import ModelCatalog
from tfrl.rllib.models.tf.fcnet import FullyConnectedNetwork
from tfrl.rllib.models.tf.tf_modelv2 import TFModelV2
from tfrl.rollout.replay_output import replay_signature
from tfrl.spaces.repeated import Repeated

pytestmark = pytest.mark.timeout(120)

SMALL = dict(PPO_CONFIG, train_batch_size=32, sgd_minibatch_size=32, num_sgd_iter=1,
             rollout_fragment_length=32, seed=1)


class CountingEnv(gym.Env):
    """Observes its step count modulo 5 (Discrete(5)); episodes of 7 steps."""

    observation_space = gym.spaces.Discrete(5)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, _config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t % 5, float(action), self.t >= 7, False, {}


class PartsModel(TFModelV2):
    """A classic custom model: a fully connected net over `obs_flat`; it keeps the parts of
    `input_dict["obs"]` it was last given."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.net = FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config,
                                         name + "_net")
        self.register_variables(self.net.variables())

    def forward(self, input_dict, state, seq_lens):
        self.last_obs = input_dict["obs"]
        return self.net.forward(input_dict, state, seq_lens)

    def value_function(self):
        return self.net.value_function()


ModelCatalog.register_custom_model("parts_model", PartsModel)
CUSTOM = {"custom_model": "parts_model", "fcnet_hiddens": [8]}


def test_a_classic_custom_model_on_a_discrete_space_gets_one_hot_rows():
    seen = []

    def recording_postprocessing(policy, batch, other_agent_batches=None, episode=None):
        seen.append(np.array(batch["obs"]))
        return postprocess_ppo_gae(policy, batch, other_agent_batches, episode)

    policy_cls = PPOTFPolicy.with_updates(name="RecordingPPO",
                                          postprocess_fn=recording_postprocessing)
    worker = RolloutWorker(CountingEnv, policy_cls, dict(SMALL, model=CUSTOM))
    try:
        policy = worker.get_policy()
        assert policy.observation_space.shape == (5,)
        assert policy.observation_space.original_space == gym.spaces.Discrete(5)
        batch = worker.sample()
        want = np.eye(5, dtype=np.float32)[batch["t"] % 5]
        np.testing.assert_array_equal(batch["obs"], want)
        # the postprocessing saw the one-hot rows too
        np.testing.assert_array_equal(np.concatenate(seen[-len(batch.split_by_episode()):]), want)
        stats = policy.learn_on_batch(batch)
        # the model was given one-hot rows as its obs
        assert policy.model.last_obs.shape.as_list()[-1] == 5
    finally:
        worker.stop()
    assert np.isfinite(stats["total_loss"])


def test_tfrls_own_models_keep_raw_observations():
    worker = RolloutWorker(CountingEnv, PPOTFPolicy, dict(SMALL, model={"fcnet_hiddens": [8]}))
    try:
        batch = worker.sample()
        assert worker.get_policy().observation_space == gym.spaces.Discrete(5)
    finally:
        worker.stop()
    np.testing.assert_array_equal(batch["obs"], batch["t"] % 5)


def test_classic_rows_restore_into_the_parts_classic_models_read():
    space = gym.spaces.Dict({"own": gym.spaces.Discrete(3),
                             "grid": gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32),
                             "pair": gym.spaces.Tuple([gym.spaces.MultiDiscrete([2, 3]),
                                                       gym.spaces.Discrete(4)])})
    space.seed(5)
    raw = [space.sample() for _ in range(4)]
    preprocessor = get_preprocessor(space)(space)
    rows = np.stack([preprocessor.transform(o) for o in raw])
    batch = tree.map_structure(lambda *xs: np.stack(xs), *raw)
    restored = classic_unflattened_obs(space, tf.constant(rows))
    want = classic_restored_obs(space, batch)
    assert restored["own"].shape.as_list() == [4, 3]
    assert restored["grid"].shape.as_list() == [4, 2, 2]
    assert restored["pair"][0].shape.as_list() == [4, 5]
    tree.map_structure(lambda a, b: np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6),
                       restored, want)


class TwoCounters(MultiAgentEnv):
    """Two agents observing Discrete(4) counts (agent 1 the double of agent 0's, mod 4); no
    space dicts, as classic envs; episodes of 5 steps."""

    def __init__(self, _config=None):
        self.t = 0

    def _obs(self):
        return {0: self.t % 4, 1: (2 * self.t) % 4}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        self.t += 1
        done = self.t >= 5
        return self._obs(), {0: 1.0, 1: 0.0}, {"__all__": done}, {"__all__": False}, {}


OBSERVER_SPACE = gym.spaces.Dict({"own": gym.spaces.Discrete(4),
                                  "other": gym.spaces.Discrete(4)})


def observer(agent_obs, **kwargs):
    assert {"worker", "base_env", "policies", "episode"} <= set(kwargs)
    return {0: {"own": agent_obs[0], "other": agent_obs[1]},
            1: {"own": agent_obs[1], "other": agent_obs[0]}}


def test_observation_fn_other_agent_batches_and_replay_signatures_of_classic_multi_agent_code():
    others_seen = []

    def needs_other_agents(policy, batch, other_agent_batches=None, episode=None):
        if policy.loss_initialized():  # classic scripts skip dummy batches so
            [(other_policy, other_batch)] = other_agent_batches.values()
            others_seen.append((other_policy, other_batch))
            batch["other_obs"] = np.array(other_batch["obs"])
        else:
            batch["other_obs"] = np.zeros_like(batch["obs"])
        return postprocess_ppo_gae(policy, batch, other_agent_batches, episode)

    policy_cls = PPOTFPolicy.with_updates(name="OtherAgentsPPO",
                                          postprocess_fn=needs_other_agents)
    policies = {pid: (policy_cls, OBSERVER_SPACE, gym.spaces.Discrete(2), {})
                for pid in ("p0", "p1")}
    config = dict(SMALL, model=CUSTOM, batch_mode="complete_episodes", multiagent={
        "policies": policies, "policy_mapping_fn": lambda agent: f"p{agent}",
        "observation_fn": observer})
    worker = RolloutWorker(TwoCounters, policies, config)
    try:
        batches = worker.sample().policy_batches
        p0 = worker.get_policy("p0")
        signature = replay_signature(p0, ["obs", "actions", "other_obs"])
    finally:
        worker.stop()
    # rows of the observer's Dict, flattened in sorted key order: other (4), own (4)
    rows0, rows1 = batches["p0"], batches["p1"]
    eye = np.eye(4, dtype=np.float32)
    np.testing.assert_array_equal(rows0["obs"], np.concatenate(
        [eye[(2 * rows0["t"]) % 4], eye[rows0["t"] % 4]], axis=1))
    np.testing.assert_array_equal(rows1["obs"][:, 4:], eye[(2 * rows1["t"]) % 4])
    # other_agent_batches: (policy, raw batch) pairs, the other agent's rows
    assert others_seen and all(isinstance(p, policy_cls) for p, _ in others_seen)
    np.testing.assert_array_equal(rows0["other_obs"], rows1["obs"])
    # a replay signature postprocesses a dummy trajectory as a dummy batch
    assert signature["obs"].shape == (8,) and signature["other_obs"].shape == (8,)


def test_the_classic_catalog_gives_preprocessors_for_spaces():
    # centralized_critic_2.py one-hot encodes actions with it
    encoder = ModelCatalog.get_preprocessor_for_space(gym.spaces.Discrete(3), {"dim": 84})
    np.testing.assert_array_equal(encoder.transform(np.int64(2)), [0.0, 0.0, 1.0])
    flat = ModelCatalog.get_preprocessor_for_space(OBSERVER_SPACE)
    np.testing.assert_array_equal(flat.transform({"own": 1, "other": 3}),
                                  [0, 0, 0, 1, 0, 1, 0, 0])


PLAYER = gym.spaces.Dict({"hp": gym.spaces.Box(0.0, 9.0, (2,), np.float32),
                          "items": Repeated(gym.spaces.Discrete(3), max_len=2)})
PARTY = Repeated(PLAYER, max_len=3)


class PartyEnv(gym.Env):
    """Observes a party of 1 to 3 players (a Repeated of Dicts holding a Repeated); episodes of
    4 steps."""

    observation_space = PARTY
    action_space = gym.spaces.Discrete(2)

    def __init__(self, _config=None):
        self.t = 0

    def _obs(self):
        return [{"hp": np.array([self.t, p], np.float32), "items": [p % 3] * (p % 2 + 1)}
                for p in range(1 + self.t % 3)]

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t >= 4, False, {}


def test_repeated_observations_reach_classic_models_as_repeated_values():
    # classic layout: [length, child 0, child 1, ...], zeros up to max_len; a child's Dict parts
    # in sorted key order, its own Repeated as [length, one-hot items...]
    child = 2 + (1 + 2 * 3)
    preprocessor = get_preprocessor(PARTY)(PARTY)
    assert preprocessor.shape == (1 + 3 * child,)
    row = preprocessor.transform([{"hp": np.array([4.0, 5.0], np.float32), "items": [2]}])
    np.testing.assert_array_equal(row[:1 + child], [1, 4, 5, 1, 0, 0, 1, 0, 0, 0])
    assert not row[1 + child:].any()
    restored = classic_unflattened_obs(PARTY, tf.constant(np.stack([row, row])))
    assert isinstance(restored, RepeatedValues) and restored.max_len == 3
    np.testing.assert_array_equal(restored.lengths, [1, 1])
    np.testing.assert_array_equal(restored.values["hp"][:, 0], [[4, 5], [4, 5]])
    items = restored.values["items"]
    np.testing.assert_array_equal(items.lengths, [[1, 0, 0]] * 2)
    np.testing.assert_array_equal(items.values[0, 0], [[0, 0, 1], [0, 0, 0]])
    [[player]] = restored.unbatch_all()[:1]
    np.testing.assert_array_equal(player["hp"], [4, 5])
    assert len(restored.unbatch_repeat_dim()) == 3
    # tfrl's own models take raw observations, which lists of varying length cannot batch
    with pytest.raises(UnsupportedSpaceError, match="classic custom model"):
        preprocessor.input_spec()

    ModelCatalog.register_custom_model("party_model", PartsModel)
    worker = RolloutWorker(PartyEnv, PPOTFPolicy, dict(SMALL, model={"custom_model": "party_model"}))
    try:
        batch = worker.sample()
        model = worker.get_policy().model
    finally:
        worker.stop()
    # rows are the flat preprocessed observations; the model read RepeatedValues of them
    assert batch["obs"].shape == (32, 1 + 3 * child)
    np.testing.assert_array_equal(batch["obs"][:, 0], 1 + batch["t"] % 3)
    assert isinstance(model.last_obs, RepeatedValues)
