"""Classic RLlib's `horizon`, `soft_horizon` and `no_done_at_end` over a rollout worker and a
trainer: episodes cut as truncations (values bootstrap), on real gymnasium envs."""
import gymnasium as gym
import numpy as np
import pytest
from rollout_test_policies import PGPolicy

from tfrl import errors
from tfrl.config import COMMON_CONFIG, merge_config
from tfrl.env import make_multi_agent
from tfrl.rollout import RolloutWorker
from tfrl.rollout.settings import WorkerSettings

pytestmark = pytest.mark.timeout(120)


class Counter(gym.Env):
    """Never ends by itself; the observation counts the steps since the env was created and
    `resets` how often it was reset."""

    observation_space = gym.spaces.Box(0, 1e6, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.steps = 0
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        return np.array([self.steps], np.float32), {}

    def step(self, action):
        self.steps += 1
        return np.array([self.steps], np.float32), 1.0, False, False, {}


def test_cartpole_episodes_are_truncated_at_the_horizon_and_bootstrap():
    # CartPole-v1 runs to 500 steps by itself; a horizon of 7 truncates every longer episode
    worker = RolloutWorker("CartPole-v1", PGPolicy,
                           {"horizon": 7, "batch_mode": "complete_episodes",
                            "rollout_fragment_length": 60, "gamma": 0.9, "seed": 3})
    batch = worker.sample()
    policy = worker.get_policy()
    pieces = batch.split_by_episode()
    truncated = 0
    for piece in pieces:
        assert piece.count <= 7
        assert piece["terminateds"][-1] != piece["truncateds"][-1]  # each ends one way
        if piece["truncateds"][-1]:
            truncated += 1
            assert piece.count == 7 and piece["t"][-1] == 6
            last_v = policy.compute_values(piece["new_obs"][-1:])[0]
            assert piece["value_targets"][-1] == pytest.approx(
                piece["rewards"][-1] + 0.9 * last_v, rel=1e-4, abs=1e-4)
    assert truncated >= 1
    lengths = [m.episode_length for m in worker.get_metrics()]
    assert len(lengths) == len(pieces) and max(lengths) <= 7 and 7 in lengths


def test_multi_agent_episodes_are_truncated_at_the_horizon():
    env_class = make_multi_agent(lambda _config: gym.make("CartPole-v1"), num_agents=2)
    worker = RolloutWorker(env_class, PGPolicy,
                           {"horizon": 4, "batch_mode": "complete_episodes",
                            "rollout_fragment_length": 20})
    batch = worker.sample()
    lengths = [m.episode_length for m in worker.get_metrics()]
    assert lengths and max(lengths) == 4  # CartPole never fails within 4 steps
    rows = batch.policy_batches["default_policy"]
    assert rows["truncateds"].sum() == 2 * len(lengths)  # both agents of every episode
    assert not rows["terminateds"].any()


def test_soft_horizon_ends_episodes_without_resetting_the_env():
    worker = RolloutWorker(Counter, PGPolicy,
                           {"horizon": 3, "soft_horizon": True, "rollout_fragment_length": 9})
    batch = worker.sample()
    assert batch["truncateds"].tolist() == [False, False, True] * 3
    # the env's count runs on across episodes: each starts where the last one ended
    np.testing.assert_array_equal(batch["obs"][:, 0], np.arange(9))
    assert len(set(batch["eps_id"].tolist())) == 3
    assert [m.episode_length for m in worker.get_metrics()] == [3, 3, 3]
    assert worker.env.resets == 1


def test_hard_horizon_resets_the_env():
    worker = RolloutWorker(Counter, PGPolicy, {"horizon": 3, "rollout_fragment_length": 9})
    worker.sample()
    assert worker.env.resets == 4  # the first reset and one after each of 3 episodes
    worker.foreach_env(lambda env: env.reset())  # the wrapped env's own methods are reachable


def test_no_done_at_end_reports_terminations_as_truncations():
    worker = RolloutWorker("CartPole-v1", PGPolicy,
                           {"no_done_at_end": True, "batch_mode": "complete_episodes",
                            "rollout_fragment_length": 50})
    batch = worker.sample()
    assert not batch["terminateds"].any()
    assert batch["truncateds"].sum() == len(worker.get_metrics()) >= 1


def test_horizon_is_a_checked_common_setting():
    assert COMMON_CONFIG["horizon"] is None
    assert merge_config(COMMON_CONFIG, {"horizon": 20})["horizon"] == 20
    assert WorkerSettings.from_config({"horizon": 20}).horizon == 20
    for bad in (0, "20", 2.5):
        with pytest.raises(errors.InvalidConfigError, match="horizon"):
            WorkerSettings.from_config({"horizon": bad})
    with pytest.raises(errors.InvalidConfigError, match="soft_horizon"):
        RolloutWorker(Counter, PGPolicy, {"soft_horizon": True})


def test_trainer_results_count_episodes_cut_at_the_horizon():
    from tfrl.agents.pg import PGTrainer

    trainer = PGTrainer(config={"env": "CartPole-v1", "num_workers": 0, "horizon": 10,
                                "rollout_fragment_length": 100, "train_batch_size": 100,
                                "seed": 1})
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    lengths = result["hist_stats"]["episode_lengths"]
    assert max(lengths) == 10 and result["episode_len_mean"] <= 10
    # 100 steps in whole or cut episodes of at most 10 steps: at least 10 of them ended
    assert result["episodes_this_iter"] == len(lengths) >= 10
