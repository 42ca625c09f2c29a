"""Policies of different observation and action spaces under one trainer: each policy's
experience goes into its own replay table with its own signature (through its own replay
writer in the worker) and reaches its own learner. Real replay server on loopback, real Ray
rollout workers, real TensorFlow."""
import sys

import gymnasium as gym
import numpy as np
import pytest

from tfrl.registry import get_trainer_class
from tfrl.env import MultiAgentEnv

OBS_SPACES = {"a": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
              "b": gym.spaces.Box(-1.0, 1.0, (6,), np.float32)}
ACT_SPACES = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(3)}
POLICY_OF = {"a": "pa", "b": "pb"}


class TwoShapes(MultiAgentEnv):
    """Agent "a" sees 4 numbers and has 2 actions, "b" sees 6 and has 3; both act every step and
    earn 1 for action 1. Episodes are truncated after 8 steps."""

    def __init__(self, config=None):
        self.possible_agents = ["a", "b"]
        self.observation_spaces = dict(OBS_SPACES)
        self.action_spaces = dict(ACT_SPACES)
        self._rng = np.random.default_rng(0)

    def _obs(self):
        return {a: self._rng.uniform(-1, 1, s.shape).astype(np.float32)
                for a, s in self.observation_spaces.items()}

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        for agent, action in action_dict.items():
            assert self.action_spaces[agent].contains(action), (agent, action)
        self.t += 1
        rewards = {agent: float(action == 1) for agent, action in action_dict.items()}
        done = self.t >= 8
        return self._obs(), rewards, {"__all__": False}, {"__all__": done}, {}


def policy_mapping(agent_id):
    return POLICY_OF[agent_id]


@pytest.fixture(scope="module", autouse=True)
def shipped_by_value():
    """Ray's workers cannot import test modules: this one travels by value."""
    from ray import cloudpickle

    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    yield
    cloudpickle.unregister_pickle_by_value(module)


def test_a_worker_writes_each_policy_into_its_table_with_its_own_shapes(free_port):
    from replay.server import Server
    from replay.table import Table
    from tfrl.agents.pg.pg_policy import PGTFPolicy
    from tfrl.rollout import ReplayOutputSpec, RolloutWorker, replay_signature

    config = {"rollout_fragment_length": 8, "model": {"fcnet_hiddens": [8]}}
    policies = {pid: (PGTFPolicy, OBS_SPACES[a], ACT_SPACES[a], {}) for a, pid in POLICY_OF.items()}
    worker = RolloutWorker(TwoShapes, policies, config, policy_mapping_fn=policy_mapping)
    signatures = {pid: replay_signature(worker.get_policy(pid)) for pid in POLICY_OF.values()}
    server = Server([Table.queue(f"steps_{pid}", 1000, signature=signatures[pid])
                     for pid in POLICY_OF.values()], port=free_port)
    try:
        worker.set_replay_output(ReplayOutputSpec(
            f"127.0.0.1:{server.port}", {pid: f"steps_{pid}" for pid in POLICY_OF.values()}))
        # two fragments: the second reuses each policy's writer
        written = [worker.sample()["items_written"] for _ in range(2)]
        client = server.localhost_client()
        items = {pid: list(client.sample(f"steps_{pid}", num_samples=16, timeout=10,
                                         emit_timesteps=False, unpack_as_table_signature=True))
                 for pid in POLICY_OF.values()}
        sizes = {name: t.current_size for name, t in client.server_info().items()}
    finally:
        worker.stop()
        server.stop()
    assert written == [{"pa": 8, "pb": 8}] * 2
    assert sizes == {"steps_pa": 0, "steps_pb": 0}  # all 16 items of each table were read
    for agent, pid in POLICY_OF.items():
        obs = np.stack([i.data["obs"] for i in items[pid]])
        logits = np.stack([i.data["action_dist_inputs"] for i in items[pid]])
        actions = np.array([i.data["actions"] for i in items[pid]])
        assert obs.shape == (16, *OBS_SPACES[agent].shape) and obs.dtype == np.float32, pid
        assert logits.shape == (16, ACT_SPACES[agent].n), pid
        assert ((actions >= 0) & (actions < ACT_SPACES[agent].n)).all(), pid
        assert np.all(np.abs(obs) <= 1.0), pid
        # rows of one policy follow each other: each next observation is the next row's one
        new_obs = np.stack([i.data["new_obs"] for i in items[pid]])
        truncated = np.array([i.data["truncateds"] for i in items[pid]])
        np.testing.assert_array_equal(new_obs[:-1][~truncated[:-1]], obs[1:][~truncated[:-1]])


def weights(trainer, pid):
    return [w.copy() for w in trainer.get_policy(pid).get_weights()]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("algo, base", [("PPO", "rollouts"), ("DQN", "replay")])
def test_policies_of_different_spaces_each_learn_from_their_own_table(ray_session, small_config,
                                                                      algo, base):
    config = dict(small_config(algo), num_envs_per_worker=1, multiagent={
        "policies": {pid: (None, None, None, {}) for pid in POLICY_OF.values()},
        "policy_mapping_fn": policy_mapping})
    trainer = get_trainer_class(algo)(config=config, env=TwoShapes)
    try:
        for agent, pid in POLICY_OF.items():
            policy = trainer.get_policy(pid)
            assert policy.observation_space == OBS_SPACES[agent]
            assert policy.action_space == ACT_SPACES[agent]
        before = {pid: weights(trainer, pid) for pid in POLICY_OF.values()}
        for _ in range(2):
            result = trainer.train()
        after = {pid: weights(trainer, pid) for pid in POLICY_OF.values()}
        info = trainer.replay.client().server_info()
        # every policy of the map acts in numpy there: the worker never starts TensorFlow
        remote = trainer.workers.foreach_worker(
            lambda w: ("tensorflow" in sys.modules, sorted(w.policy_map),
                       {type(p).__name__ for p in w.policy_map.values()}), local_worker=False)
    finally:
        trainer.stop()

    stand_in = "NumpyQPolicy" if algo == "DQN" else "NumpyPolicy"
    assert remote == [(False, ["pa", "pb"], {stand_in})]

    assert set(result["info"]["learner"]) == {"pa", "pb"}
    for pid in POLICY_OF.values():
        stats = result["info"]["learner"][pid]
        assert stats and all(np.isfinite(v) for v in stats.values() if np.ndim(v) == 0), pid
        assert any(not np.allclose(b, a) for b, a in zip(before[pid], after[pid])), \
            f"policy {pid} did not learn"
    assert set(result["policy_reward_mean"]) == {"pa", "pb"}
    # each table keeps its own policy's shapes, and both received items from the worker
    assert set(info) == {f"{base}_pa", f"{base}_pb"}
    for agent, pid in POLICY_OF.items():
        table = info[f"{base}_{pid}"]
        assert table.signature["obs"].shape == OBS_SPACES[agent].shape
        assert table.signature["new_obs"].shape == OBS_SPACES[agent].shape
        assert table.signature["actions"].shape == ()
        # both agents act at every step: one item per env step in each table
        if algo == "PPO":  # and the learner read back exactly what was written
            assert table.num_inserts == result["timesteps_total"], pid
            assert table.num_samples == table.num_inserts and table.current_size == 0, pid
        else:  # DQN samples one round ahead, which may be written already
            ahead = table.num_inserts - result["timesteps_total"]
            assert 0 <= ahead <= config["rollout_fragment_length"], pid
            assert table.num_samples > 0, pid
