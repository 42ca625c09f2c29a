"""Multi-agent configs through the trainers: several policies, each with its own replay table and
learner, `policies_to_train` respected, and per-policy results (`policy_reward_mean`,
`info.learner`). Real Ray rollout workers and the trainer's embedded replay server."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.registry import get_trainer_class
from tfrl.env import ParallelPettingZooEnv, make_multi_agent

TwoCartPoles = make_multi_agent("CartPole-v1", 2)


def agent_to_policy(agent_id):
    return f"p{agent_id}"


def two_policy_config(config, policies_to_train=("p0",)):
    config["multiagent"] = {
        # None: the trainer's own policy class, spaces from the env's agents
        "policies": {"p0": (None, None, None, {}), "p1": (None, None, None, {})},
        "policy_mapping_fn": agent_to_policy,
        "policies_to_train": list(policies_to_train) if policies_to_train else None,
    }
    return config


def weights(trainer, pid):
    return [w.copy() for w in trainer.get_policy(pid).get_weights()]


def remote_weights(trainer, pid):
    import ray

    return ray.get(trainer.workers.remote_workers()[0].get_weights.remote([pid]))[pid]


def changed(before, after):
    return any(not np.allclose(b, a) for b, a in zip(before, after))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo", ["PPO", "DQN", "A3C"])
def test_only_the_policies_to_train_learn_and_results_are_per_policy(ray_session, small_config,
                                                                     algo):
    config = dict(two_policy_config(small_config(algo)), min_iter_time_s=0)
    trainer = get_trainer_class(algo)(config=config, env=TwoCartPoles)
    try:
        before = {pid: weights(trainer, pid) for pid in ("p0", "p1")}
        for _ in range(2):
            result = trainer.train()
        after = {pid: weights(trainer, pid) for pid in ("p0", "p1")}
        remote_p1 = remote_weights(trainer, "p1")
        tables = set(trainer.replay.client().server_info()) if trainer.replay._server else set()
    finally:
        trainer.stop()
    assert changed(before["p0"], after["p0"]), "the policy to train did not learn"
    assert not changed(before["p1"], after["p1"]), "a policy outside policies_to_train changed"
    assert not changed(before["p1"], remote_p1)
    assert set(result["policy_reward_mean"]) == {"p0", "p1"}
    assert set(result["info"]["learner"]) == {"p0"}
    assert all(np.isfinite(v) for v in result["info"]["learner"]["p0"].values()
               if np.ndim(v) == 0)
    if algo == "PPO":
        assert tables == {"rollouts_p0"}
    elif algo == "DQN":
        assert tables == {"replay_p0"}


class TwoSidedCoins:
    """A PettingZoo parallel env: agents "left" and "right" see a coin side (a one-hot Box);
    "left" is paid for matching it, "right" for the opposite side; "right" leaves after 3
    steps, the episode ends (truncated) after 6."""

    metadata = {"name": "two_sided_coins_v0"}

    def __init__(self):
        self.possible_agents = ["left", "right"]
        self._rng = np.random.default_rng(0)

    def observation_space(self, agent):
        return gym.spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def _coin(self):
        side = int(self._rng.integers(2))
        return side, np.eye(2, dtype=np.float32)[side]

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self.side, obs = self._coin()
        return {a: obs for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        rewards = {"left": float(actions["left"] == self.side)}
        if "right" in actions:
            rewards["right"] = float(actions["right"] != self.side)
        terminateds = {a: a == "right" and self.t >= 3 for a in self.agents}
        truncateds = {a: self.t >= 6 for a in self.agents}
        self.side, obs = self._coin()
        observations = {a: obs for a in self.agents}
        self.agents = [a for a in self.agents if not (terminateds[a] or truncateds[a])]
        return observations, rewards, terminateds, truncateds, {a: {} for a in observations}

    def close(self):
        pass


def make_coins(env_config):
    from pettingzoo import ParallelEnv

    env = type("TwoSidedCoinsEnv", (TwoSidedCoins, ParallelEnv), {})()
    return ParallelPettingZooEnv(env)


def test_pettingzoo_adapter_ends_the_episode_for_all_agents():
    pytest.importorskip("pettingzoo")
    env = make_coins({})
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"left", "right"} and env.get_action_space("right") == gym.spaces.Discrete(2)
    for t in range(1, 7):
        actions = {a: 0 for a in obs}
        obs, rewards, terminateds, truncateds, _ = env.step(actions)
        assert set(rewards) == set(actions)
        assert terminateds["__all__"] is False
        assert truncateds["__all__"] is (t == 6)
        obs = {a: o for a, o in obs.items() if not (terminateds[a] or truncateds[a])}
    assert obs == {}


@pytest.mark.timeout(300)
def test_dqn_trains_two_policies_on_a_pettingzoo_env_each_from_its_own_table(ray_session,
                                                                             small_config):
    pytest.importorskip("pettingzoo")
    config = small_config("DQN")
    config["multiagent"] = {"policies": {"left": (None, None, None, {}),
                                         "right": (None, None, None, {})},
                            "policy_mapping_fn": lambda agent: agent}
    trainer = get_trainer_class("DQN")(config=config, env=make_coins)
    try:
        before = {pid: weights(trainer, pid) for pid in ("left", "right")}
        for _ in range(2):
            result = trainer.train()
        after = {pid: weights(trainer, pid) for pid in ("left", "right")}
        info = trainer.replay.client().server_info()
        lanes = trainer.optimizer.lanes
    finally:
        trainer.stop()
    assert changed(before["left"], after["left"]) and changed(before["right"], after["right"])
    assert set(result["policy_reward_mean"]) == {"left", "right"}
    assert set(result["info"]["learner"]) == {"left", "right"}
    # "left" acts at all 6 steps, "right" at the first 3: each earns 1 per correct guess
    assert 0 <= result["policy_reward_mean"]["left"] <= 6
    assert 0 <= result["policy_reward_mean"]["right"] <= 3
    assert set(info) == {"replay_left", "replay_right"}
    for pid in ("left", "right"):
        # each policy's steps went into its own table (the round still in flight may have
        # added more), and its own learner trained on them
        assert info[f"replay_{pid}"].num_inserts >= lanes[pid].items_inserted > 0
        assert lanes[pid].num_train_steps > 0
    # "right" acts half as often as "left", so its table received about half the items
    assert lanes["right"].items_inserted < lanes["left"].items_inserted
