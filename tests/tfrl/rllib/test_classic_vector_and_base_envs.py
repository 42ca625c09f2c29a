"""Classic RLlib's VectorEnv and BaseEnv returned by env creators, sampled by tfrl's rollout
workers as classic RLlib 1.x sampled them: a VectorEnv's sub-envs as one batch, a BaseEnv by
polling (agents act when they have an observation), classic dones read as terminations unless
the info says `TimeLimit.truncated`. Real gymnasium CartPoles behind classic gym's API."""
import sys
from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
import ray.cloudpickle

from tfrl import errors
from tfrl.policy import MultiAgentBatch, SampleBatch
from tfrl.policy.sample_batch import concat_samples
from tfrl.rllib.agents.pg import PGTFPolicy, PGTrainer
from tfrl.rllib.agents.ppo import PPOTrainer
from tfrl.rllib.env import BaseEnv, VectorEnv
from tfrl.rllib.env.base_env import _DUMMY_AGENT_ID
from tfrl.rollout import RolloutWorker

pytestmark = pytest.mark.timeout(300)

# the remote worker builds this module's envs: Ray ships them by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

MODEL = {"fcnet_hiddens": [8]}


class ClassicCartPole:
    """CartPole behind classic gym's API (reset() -> obs, 4-value step, a time limit as a done
    with `TimeLimit.truncated`), rewards scaled by `scale`; it records the length and return of
    every episode that ends."""

    def __init__(self, scale=1.0, max_steps=500, seed=None):
        self.env = gym.make("CartPole-v1", max_episode_steps=max_steps)
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self.scale = scale
        self.next_seed = seed
        self.episodes = []  # (length, return) of each ended episode

    def reset(self):
        self.length, self.ret = 0, 0.0
        seed, self.next_seed = self.next_seed, None
        return self.env.reset(seed=seed)[0]

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward *= self.scale
        self.length += 1
        self.ret += reward
        if terminated or truncated:
            self.episodes.append((self.length, self.ret))
        info = dict(info, **{"TimeLimit.truncated": True}) if truncated and not terminated \
            else info
        return obs, reward, terminated or truncated, info


class CartPoles(VectorEnv):
    """A classic VectorEnv of `copies` ClassicCartPoles; sub-env i's rewards are i + 1."""

    def __init__(self, config=None):
        config = config or {}
        self.envs = [ClassicCartPole(scale=i + 1.0, max_steps=config.get("max_steps", 500),
                                     seed=100 + i) for i in range(config.get("copies", 3))]
        super().__init__(self.envs[0].observation_space, self.envs[0].action_space,
                         len(self.envs))

    def vector_reset(self):
        return [env.reset() for env in self.envs]

    def reset_at(self, index):
        return self.envs[index].reset()

    def vector_step(self, actions):
        obs, rewards, dones, infos = [], [], [], []
        for env, action in zip(self.envs, actions):
            o, r, d, i = env.step(action)
            obs.append(o)
            rewards.append(r)
            dones.append(d)
            infos.append(i)
        return obs, rewards, dones, infos

    def get_unwrapped(self):
        return self.envs


def episodes_by_env(batch):
    """{env_id: [(length, return) of each episode in the rows, in order]}."""
    out = defaultdict(list)
    for piece in batch.split_by_episode():
        assert len(set(piece["env_id"].tolist())) == 1  # an episode stays in its sub-env
        assert piece["t"][0] == 0 and (piece["terminateds"][-1] or piece["truncateds"][-1])
        out[int(piece["env_id"][0])].append((piece.count, float(piece["rewards"].sum())))
    return out


def test_a_classic_vector_env_trains_with_ppo_from_a_registered_creator(ray_session):
    from ray.tune.registry import register_env

    register_env("classic_cartpoles", lambda config: CartPoles(config))
    config = {"env": "classic_cartpoles", "num_workers": 0, "rollout_fragment_length": 40,
              "train_batch_size": 120, "sgd_minibatch_size": 60, "num_sgd_iter": 2,
              "batch_mode": "complete_episodes", "model": MODEL, "seed": 1}
    with PPOTrainer(config=config) as trainer:
        worker = trainer.workers.local_worker()
        before = worker.get_weights()["default_policy"]
        result = trainer.train()
        sub_envs = worker.foreach_env(lambda env: env)
        assert [type(env) for env in sub_envs] == [ClassicCartPole] * 3  # the VectorEnv's own
        assert len(worker.envs) == 1  # made once, whatever num_envs_per_worker says
        ended = [e for env in sub_envs for e in env.episodes]
        assert result["timesteps_total"] >= 120
        assert result["episodes_total"] == len(ended)
        assert result["episode_len_mean"] == pytest.approx(np.mean([n for n, _ in ended]))
        assert result["episode_reward_mean"] == pytest.approx(np.mean([r for _, r in ended]))
        after = worker.get_weights()["default_policy"]
        assert any(not np.array_equal(x, y) for x, y in zip(before, after))

        # the rows of one more fragment (the runner's: the trainer's worker writes into
        # replay): each sub-env's episodes, whole, as the sub-env did them
        seen = [len(env.episodes) for env in sub_envs]
        batches = []
        while len(batches) < 10 and not all(len(env.episodes) > n
                                            for env, n in zip(sub_envs, seen)):
            batches.append(worker.runner.sample())
        assert all(isinstance(b, SampleBatch) and b.count >= 40 for b in batches)
        batch = concat_samples(batches)
        rows = episodes_by_env(batch)
        assert set(rows) == {0, 1, 2}
        for i, env in enumerate(sub_envs):
            assert rows[i] == [pytest.approx(e) for e in env.episodes[seen[i]:]]
            rewards = batch["rewards"][batch["env_id"] == i]
            np.testing.assert_array_equal(rewards, np.full(len(rewards), i + 1.0))


def test_a_remote_worker_samples_a_classic_vector_env(ray_session):
    # a time limit of 8 ends episodes in every 20-step fragment whatever the policy does
    config = {"env": CartPoles, "env_config": {"copies": 2, "max_steps": 8}, "num_workers": 1,
              "rollout_fragment_length": 20, "train_batch_size": 40, "model": MODEL}
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
        # the local worker's VectorEnv never steps; the remote one's sub-envs did the episodes
        local, remote = trainer.workers.foreach_env(lambda env: list(env.episodes))
    assert local == [[], []]
    ended = remote[0] + remote[1]
    assert len(remote[0]) >= 2 and len(remote[1]) >= 2
    assert result["timesteps_total"] == 40 and result["episodes_total"] == len(ended)
    assert result["episode_reward_mean"] == pytest.approx(np.mean([r for _, r in ended]))


def test_vector_env_wrap_of_existing_gymnasium_envs_truncates_at_their_time_limit(ray_session):
    envs = [gym.make("CartPole-v1", max_episode_steps=5) for _ in range(2)]
    wrapped = VectorEnv.wrap(existing_envs=envs)
    assert wrapped.num_envs == 2 and wrapped.get_unwrapped() == envs
    assert wrapped.observation_space == envs[0].observation_space
    assert len(wrapped.vector_reset()) == 2
    for _ in range(4):
        obs, rewards, dones, infos = wrapped.vector_step([0, 1])
        assert dones == [False, False]
    obs, rewards, dones, infos = wrapped.vector_step([0, 1])
    # CartPole cannot fall in 5 steps: the time limit ends both, as classic gym's TimeLimit did
    assert dones == [True, True] and all(info["TimeLimit.truncated"] for info in infos)
    assert len(obs) == 2 and rewards == [1.0, 1.0]

    def creator(_config):
        return VectorEnv.wrap(existing_envs=[gym.make("CartPole-v1", max_episode_steps=5)
                                             for _ in range(2)])

    config = {"env": creator, "num_workers": 0, "rollout_fragment_length": 10,
              "train_batch_size": 20, "model": MODEL}
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
        batch = trainer.workers.local_worker().runner.sample()
    assert result["episode_len_mean"] == 5 and result["episodes_total"] == 4
    assert batch.count == 20 and not batch["terminateds"].any()
    np.testing.assert_array_equal(batch["truncateds"], batch["t"] % 5 == 4)


def test_vector_env_wrap_makes_the_missing_sub_envs_and_seeds_them():
    made = []

    def make_env(index):
        made.append(index)
        return ClassicCartPole() if index % 2 else gym.make("CartPole-v1")

    wrapped = VectorEnv.wrap(make_env=make_env, existing_envs=[gym.make("CartPole-v1")],
                             num_envs=3)
    assert made == [1, 2] and wrapped.num_envs == 3
    wrapped.seed(7)
    first = wrapped.vector_reset()
    wrapped.seed(7)
    assert np.array_equal(wrapped.reset_at(0), first[0])
    *_, dones, _ = wrapped.vector_step([0, 0, 0])
    assert dones == [False, False, False]
    with pytest.raises(errors.InvalidEnvError, match="no make_env"):
        VectorEnv.wrap(existing_envs=[gym.make("CartPole-v1")], num_envs=2)


class ShortRewards(CartPoles):
    def vector_step(self, actions):
        obs, rewards, dones, infos = super().vector_step(actions)
        return obs, rewards[:-1], dones, infos


class NoSubEnvs(CartPoles):
    def __init__(self, config=None):
        super().__init__(config)
        self.num_envs = 0


def test_a_bad_vector_env_is_a_named_error():
    worker = RolloutWorker(ShortRewards, PGTFPolicy, {"model": MODEL,
                                                      "rollout_fragment_length": 4})
    with pytest.raises(errors.InvalidEnvError,
                       match=r"rewards of a VectorEnv's vector_step\(\) must be a list of "
                             r"num_envs=3 values .* has 2 values"):
        worker.sample()
    with pytest.raises(errors.InvalidEnvError, match="num_envs 0"):
        RolloutWorker(NoSubEnvs, PGTFPolicy, {"model": MODEL})


def test_a_vector_env_honours_the_horizon():
    worker = RolloutWorker(CartPoles, PGTFPolicy, {"model": MODEL, "horizon": 3,
                                                   "rollout_fragment_length": 6})
    batch = worker.sample()
    assert batch.count == 18
    np.testing.assert_array_equal(batch["truncateds"], batch["t"] % 3 == 2)
    assert [m.episode_length for m in worker.get_metrics()] == [3] * 6


OBS = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACT = gym.spaces.Discrete(2)


class TakeTurns(BaseEnv):
    """Two sub-envs, ids "x" and "y", of two agents that never act together: "a" observes at
    even steps, "b" (who joins at step 1) at odd ones and always takes the off-policy action 1
    itself. An episode ends after 6 steps with both observing; `try_reset` resets it. `sent`
    records the agents each send_actions named per sub-env."""

    def __init__(self, config=None):
        self.t = {"x": 0, "y": 0}
        self.sent = []
        self._due = {env_id: self._reset_obs(env_id) for env_id in self.t}

    @staticmethod
    def _obs(t):
        return np.array([t, 1.0], np.float32)

    def _reset_obs(self, env_id):
        self.t[env_id] = 0
        return ({"a": self._obs(0)}, {"a": None}, {"__all__": False}, {"a": {}})

    def poll(self):
        out = ({}, {}, {}, {}, {})
        for env_id, (obs, rewards, dones, infos) in self._due.items():
            for d, value in zip(out, (obs, rewards, dones, infos)):
                d[env_id] = value
            if "b" in obs:
                out[4][env_id] = {"b": 1}
        self.last_polled = {env_id: set(obs) for env_id, (obs, *_) in self._due.items()}
        self._due = {}
        return out

    def send_actions(self, action_dict):
        self.sent.append({env_id: set(actions) for env_id, actions in action_dict.items()})
        assert {env_id: set(a) for env_id, a in action_dict.items()} == self.last_polled
        for env_id, actions in action_dict.items():
            assert "b" not in actions or actions["b"] == 1  # its own off-policy action back
            self.t[env_id] += 1
            t = self.t[env_id]
            done = t >= 6
            agents = ["a", "b"] if done else (["b"] if t % 2 else ["a"])
            # "b"'s first observation (step 1) comes with no reward of its own
            rewards = {agent: 1.0 if agent == "a" else 2.0 * (t > 1) for agent in agents}
            self._due[env_id] = ({agent: self._obs(t) for agent in agents}, rewards,
                                 {"__all__": done}, {agent: {} for agent in agents})

    def try_reset(self, env_id=None):
        # the runner starts the next episode from what this returns
        self.t[env_id] = 0
        self.last_polled[env_id] = {"a"}
        return {"a": self._obs(0)}


def test_a_custom_base_env_with_agents_acting_at_different_times():
    policies = {"pa": (PGTFPolicy, OBS, ACT, {}), "pb": (PGTFPolicy, OBS, ACT, {})}
    worker = RolloutWorker(TakeTurns, policies,
                           {"model": MODEL, "rollout_fragment_length": 12,
                            "multiagent": {"policies": policies,
                                           "policy_mapping_fn": lambda agent: "p" + agent}})
    assert worker.multi_agent
    batch = worker.sample()
    env = worker.env
    assert isinstance(batch, MultiAgentBatch) and batch.env_steps() == 24
    # only agents with an observation act: "a" alone at even steps, "b" alone at odd ones
    for sent in env.sent:
        assert all(agents in ({"a"}, {"b"}) for agents in sent.values())
    a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
    assert a.count == b.count == 12  # 3 rows each per 6-step episode, 2 sub-envs x 2 episodes
    np.testing.assert_array_equal(a["rewards"], np.ones(12))
    np.testing.assert_array_equal(b["rewards"], np.full(12, 2.0))
    np.testing.assert_array_equal(b["actions"], np.ones(12))  # its off-policy actions
    # rows go from an agent's observation to its next one ("b"'s last: step 5 to the end, 6)
    np.testing.assert_array_equal(a["new_obs"][:, 0] - a["obs"][:, 0], np.full(12, 2.0))
    np.testing.assert_array_equal(b["new_obs"][:, 0] - b["obs"][:, 0], [2.0, 2.0, 1.0] * 4)
    assert a["terminateds"].sum() == b["terminateds"].sum() == 4
    metrics = worker.get_metrics()
    assert len(metrics) == 4
    for m in metrics:
        assert m.episode_length == 6 and m.episode_reward == 3 * 1.0 + 3 * 2.0
        assert m.agent_rewards == {("a", "pa"): 3.0, ("b", "pb"): 6.0}


def test_a_base_env_honours_the_horizon_where_it_resets_on_request():
    policies = {"pa": (PGTFPolicy, OBS, ACT, {}), "pb": (PGTFPolicy, OBS, ACT, {})}
    worker = RolloutWorker(TakeTurns, policies,
                           {"model": MODEL, "rollout_fragment_length": 8, "horizon": 4,
                            "multiagent": {"policies": policies,
                                           "policy_mapping_fn": lambda agent: "p" + agent}})
    batch = worker.sample()
    assert [m.episode_length for m in worker.get_metrics()] == [4] * 4
    for policy_batch in batch.policy_batches.values():
        assert policy_batch["truncateds"].sum() == 4 and not policy_batch["terminateds"].any()
    worker = RolloutWorker(TwoCartPoles, PGTFPolicy, {"model": MODEL, "horizon": 3})
    with pytest.raises(errors.InvalidConfigError, match="try_reset.*returned None"):
        worker.sample()


class TwoCartPoles(BaseEnv):
    """A single-agent BaseEnv of two ClassicCartPoles with env ids "left" and "right": an ended
    sub-env resets itself (`try_reset` returns None) and its next observation comes with the
    next poll."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.envs = {"left": ClassicCartPole(seed=1), "right": ClassicCartPole(scale=3.0, seed=2)}
        self._due = {env_id: self._reset(env_id) for env_id in self.envs}

    def _reset(self, env_id):
        return (self.envs[env_id].reset(), None, False, {})

    def poll(self):
        obs, rewards, dones, infos = ({env_id: {_DUMMY_AGENT_ID: value[k]}
                                       for env_id, value in self._due.items()}
                                      for k in range(4))
        for env_id in dones:
            dones[env_id] = {"__all__": dones[env_id][_DUMMY_AGENT_ID]}
        self._ended = [env_id for env_id, (_, _, done, _) in self._due.items() if done]
        self._due = {}
        return obs, rewards, dones, infos, {}

    def send_actions(self, action_dict):
        assert set(action_dict) == set(self.envs) - set(self._ended)
        for env_id, actions in action_dict.items():
            self._due[env_id] = self.envs[env_id].step(actions[_DUMMY_AGENT_ID])
        for env_id in self._ended:
            self._due[env_id] = self._reset(env_id)

    def get_unwrapped(self):
        return list(self.envs.values())


def test_a_single_agent_base_env_trains_with_the_default_policy(ray_session):
    config = {"env": TwoCartPoles, "num_workers": 0, "rollout_fragment_length": 50,
              "train_batch_size": 100, "batch_mode": "complete_episodes", "model": MODEL}
    with PGTrainer(config=config) as trainer:
        worker = trainer.workers.local_worker()
        result = trainer.train()
        assert not worker.multi_agent
        left, right = worker.foreach_env(lambda env: env)
        ended = left.episodes + right.episodes
        assert result["episodes_total"] == len(ended)
        assert result["episode_reward_mean"] == pytest.approx(np.mean([r for _, r in ended]))
        seen = len(left.episodes), len(right.episodes)
        batch = worker.runner.sample()
    assert isinstance(batch, SampleBatch) and batch.count >= 50
    pieces = batch.split_by_episode()
    rewards = sorted(float(piece["rewards"].sum()) for piece in pieces)
    new = left.episodes[seen[0]:] + right.episodes[seen[1]:]
    assert rewards == pytest.approx(sorted(r for _, r in new))
    assert all(piece["terminateds"][-1] for piece in pieces)


def test_to_base_env_adapts_the_other_env_kinds():
    base = BaseEnv.to_base_env(gym.make("CartPole-v1"),
                               make_env=lambda index: gym.make("CartPole-v1"), num_envs=2)
    obs, rewards, dones, infos, off_policy = base.poll()
    assert set(obs) == {0, 1} and set(obs[0]) == {_DUMMY_AGENT_ID}
    assert rewards[0] == {_DUMMY_AGENT_ID: None} and dones[1] == {"__all__": False}
    base.send_actions({0: {_DUMMY_AGENT_ID: 0}, 1: {_DUMMY_AGENT_ID: 1}})
    obs, rewards, *_ = base.poll()
    assert rewards == {0: {_DUMMY_AGENT_ID: 1.0}, 1: {_DUMMY_AGENT_ID: 1.0}}
    assert set(base.try_reset(0)) == {_DUMMY_AGENT_ID}
    assert BaseEnv.to_base_env(base) is base
    with pytest.raises(errors.NotSupportedError, match="remote_envs"):
        BaseEnv.to_base_env(gym.make("CartPole-v1"), num_envs=2, remote_envs=True)
