"""Multi-agent rollouts: policy mapping, agents acting at different rates, MultiAgentBatch."""
import gymnasium as gym
import numpy as np
import pytest
from rollout_test_policies import PGPolicy

from tfrl.env import MultiAgentEnv, make_multi_agent
from tfrl.rollout import RolloutWorker
from tfrl.policy import MultiAgentBatch

pytestmark = pytest.mark.timeout(120)


class TwoAgentCounter(MultiAgentEnv):
    """'a' acts every step (reward 1 per step), 'b' every other step (reward 2 per step, so 4
    per row of its own); the episode terminates after 4 steps."""

    def __init__(self, config=None):
        self.possible_agents = ["a", "b"]
        space = gym.spaces.Box(-10, 10, (1,), np.float32)
        self.observation_spaces = {"a": space, "b": space}
        self.action_spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": np.zeros(1, np.float32), "b": np.zeros(1, np.float32)}, {}

    def step(self, action_dict):
        assert set(action_dict) == ({"a", "b"} if self.t % 2 == 0 else {"a"})
        self.t += 1
        obs = {"a": np.full(1, self.t, np.float32)}
        if self.t % 2 == 0:
            obs["b"] = np.full(1, self.t, np.float32)
        done = self.t >= 4
        return obs, {"a": 1.0, "b": 2.0}, {"__all__": done}, {"__all__": False}, {}


def make_worker(**config):
    policies = {"pa": (PGPolicy, None, None, {}), "pb": (PGPolicy, None, None, {"lr": 0.001})}
    return RolloutWorker(TwoAgentCounter, policies,
                         dict({"rollout_fragment_length": 8}, **config),
                         policy_mapping_fn=lambda agent: "p" + agent,
                         policies_to_train=["pb"])


def test_agents_are_batched_per_policy_and_rewards_accumulate_between_observations():
    worker = make_worker(num_envs_per_worker=2)
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.env_steps() == 16
    a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
    assert a.count == 16 and b.count == 8
    np.testing.assert_array_equal(a["rewards"], np.ones(16))
    np.testing.assert_array_equal(b["rewards"], np.full(8, 4.0))
    # b observed t=0 and t=2: its rows go from one of its observations to the next
    np.testing.assert_array_equal(b["new_obs"][:, 0] - b["obs"][:, 0], np.full(8, 2.0))
    assert b["terminateds"].sum() == 4 and a["terminateds"].sum() == 4
    assert "advantages" in a and "advantages" in b
    metrics = worker.get_metrics()
    assert len(metrics) == 4
    for m in metrics:
        assert m.episode_reward == 4 * 1.0 + 4 * 2.0
        assert m.agent_rewards == {("a", "pa"): 4.0, ("b", "pb"): 8.0}


def test_only_policies_to_train_learn():
    worker = make_worker()
    batch = worker.sample()
    before = worker.get_weights()
    stats = worker.learn_on_batch(batch)
    assert set(stats) == {"pb"}
    after = worker.get_weights()
    assert all(np.array_equal(x, y) for x, y in zip(before["pa"], after["pa"]))
    assert any(not np.array_equal(x, y) for x, y in zip(before["pb"], after["pb"]))


def test_independent_copies_of_a_gymnasium_env_with_one_shared_policy():
    env_class = make_multi_agent("CartPole-v1", 3)
    worker = RolloutWorker(lambda cfg: env_class(cfg), PGPolicy,
                           {"rollout_fragment_length": 30, "batch_mode": "complete_episodes"})
    batch = worker.sample()
    shared = batch.policy_batches["default_policy"]
    assert set(np.unique(shared["agent_index"])) == {0, 1, 2}
    for piece in shared.split_by_episode():
        assert piece["terminateds"][-1] or piece["truncateds"][-1]


def test_finished_episodes_carry_the_runners_sampler_perf():
    worker = make_worker(num_envs_per_worker=2)
    worker.sample()
    metrics = worker.get_metrics()
    assert metrics
    for m in metrics:
        assert set(m.perf_stats) == {"mean_env_wait_ms", "mean_inference_ms",
                                     "mean_processing_ms"}
        assert all(v > 0 for v in m.perf_stats.values()), m.perf_stats
