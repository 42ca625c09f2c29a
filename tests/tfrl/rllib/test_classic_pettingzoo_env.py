"""Classic RLlib 1.x's `PettingZooEnv` (`tfrl.rllib.env`): a PettingZoo AEC env, turn-based, as
a multi-agent env whose observation dicts hold only the agent to act; and PG training on it from
a registered creator. The env is a real `pettingzoo.AECEnv` (a take-away game, checked by
PettingZoo's own API test), plus PettingZoo's tic-tac-toe where its pygame extra is installed."""
import sys
from collections import defaultdict

import numpy as np
import pytest
import ray.cloudpickle

pettingzoo = pytest.importorskip("pettingzoo")

from gymnasium import spaces  # noqa: E402
from pettingzoo.utils import wrappers  # noqa: E402

from tfrl import errors  # noqa: E402
from tfrl.policy import SampleBatch  # noqa: E402
from tfrl.rllib.env import ParallelPettingZooEnv, PettingZooEnv  # noqa: E402

pytestmark = pytest.mark.timeout(300)

# Ray ships this module's env creator by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Countdown(pettingzoo.AECEnv):
    """A take-away game: the players take turns taking 1 or 2 (action 0 or 1) from a counter
    that starts at `start`; whoever takes the last wins (+1, the others -1). Each move gives
    every other player `gift` times what was taken. The `quitter` leaves after its first move
    (-0.5, terminated) while the others play on; after `max_moves` moves all are truncated.
    Observations are (counter, moves so far)."""

    metadata = {"name": "countdown_v0", "render_modes": [], "is_parallelizable": False}

    def __init__(self, players=("player_0", "player_1"), start=5, max_moves=100, quitter=None,
                 gift=0.0, heterogeneous=False):
        super().__init__()
        self.possible_agents = list(players)
        self.start, self.max_moves, self.quitter, self.gift = start, max_moves, quitter, gift
        self._obs_space = spaces.Box(0.0, float(max(start, max_moves)), (2,), np.float32)
        # heterogeneous: the last player may also pass (action 2, takes 1 too)
        self._act_spaces = {a: spaces.Discrete(3 if heterogeneous and a == players[-1] else 2)
                            for a in players}

    def observation_space(self, agent):
        return self._obs_space

    def action_space(self, agent):
        return self._act_spaces[agent]

    def observe(self, agent):
        return np.array([self.counter, self.moves], np.float32)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.counter, self.moves = self.start, 0
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = self.agents[0]

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        taken = min(self.counter, 2 if int(action) == 1 else 1)
        self.counter -= taken
        self.moves += 1
        self.rewards = {a: (0.0 if a == agent else self.gift * taken) for a in self.agents}
        self.infos[agent] = {"took": taken}
        if self.counter == 0:
            for a in self.agents:
                self.rewards[a] += 1.0 if a == agent else -1.0
                self.terminations[a] = True
        elif agent == self.quitter:
            self.rewards[agent] -= 0.5
            self.terminations[agent] = True
        elif self.moves >= self.max_moves:
            self.truncations = {a: True for a in self.agents}
        self._accumulate_rewards()
        i = self.agents.index(agent)
        live = [a for a in self.agents[i + 1:] + self.agents[:i + 1]
                if not (self.terminations[a] or self.truncations[a])]
        self.agent_selection = live[0] if live else agent
        self._deads_step_first()


class Matching(pettingzoo.ParallelEnv):
    """A parallel one-shot game: both players pick 0 or 1 at once; 1 each if they match."""

    metadata = {"name": "matching_v0"}
    possible_agents = ["player_0", "player_1"]
    render_mode = None

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        reward = float(actions["player_0"] == actions["player_1"])
        agents, self.agents = self.agents, []
        return ({a: np.ones(1, np.float32) for a in agents}, {a: reward for a in agents},
                {a: True for a in agents}, {a: False for a in agents}, {a: {} for a in agents})


def countdown(**kwargs):
    """The game with PettingZoo's standard wrappers, as a PettingZoo module's env() gives it."""
    return wrappers.OrderEnforcingWrapper(wrappers.AssertOutOfBoundsWrapper(Countdown(**kwargs)))


def test_the_test_game_passes_pettingzoos_api_test():
    from pettingzoo.test import api_test

    for kwargs in ({}, {"players": ("player_0", "player_1", "player_2"), "start": 9,
                        "quitter": "player_2", "gift": 0.1},
                   {"start": 20, "max_moves": 3}, {"heterogeneous": True}):
        api_test(countdown(**kwargs), num_cycles=20)


def test_only_the_agent_to_act_observes_and_every_reward_reaches_its_agent():
    env = PettingZooEnv(countdown(players=("a", "b", "c"), start=9, quitter="c", gift=0.1))
    assert env.possible_agents == ["a", "b", "c"]
    assert env.observation_space == env.get_observation_space("b") == spaces.Box(
        0.0, 100.0, (2,), np.float32)
    assert env.action_space == env.action_spaces["c"] == spaces.Discrete(2)
    obs, infos = env.reset(seed=3)
    assert list(obs) == ["a"] and list(infos) == ["a"]
    np.testing.assert_array_equal(obs["a"], [9, 0])

    # a takes 1, b takes 1: only the next player observes, with the gifts since it last acted
    obs, rewards, terminateds, truncateds, infos = env.step({"a": 0})
    assert list(obs) == ["b"] and rewards == {"b": pytest.approx(0.1)}
    assert terminateds == {"b": False, "__all__": False}
    assert truncateds == {"b": False, "__all__": False}
    obs, rewards, terminateds, _, _ = env.step({"b": 0})
    assert list(obs) == ["c"] and rewards == {"c": pytest.approx(0.2)}

    # c takes 2 and quits: it is reported done with its reward, then a, who is next, observes
    # the gifts of b's and c's moves; the episode goes on without c
    obs, rewards, terminateds, truncateds, infos = env.step({"c": 1})
    assert list(obs) == ["c", "a"]
    np.testing.assert_array_equal(obs["a"], [5, 3])
    assert rewards == {"c": pytest.approx(-0.5), "a": pytest.approx(0.1 + 0.2)}
    assert terminateds == {"c": True, "a": False, "__all__": False}
    assert truncateds == {"c": False, "a": False, "__all__": False}
    assert infos["c"] == {"took": 2}
    assert env.env.agents == ["a", "b"]

    # a takes 2, b takes 2, a takes the last one and wins: b, who did not move last, gets its
    # -1 (and a's gifts) with its final observation, and the episode ends for all
    obs, rewards, _, _, _ = env.step({"a": 1})
    assert list(obs) == ["b"] and rewards == {"b": pytest.approx(0.2 + 0.2)}
    obs, rewards, _, _, _ = env.step({"b": 1})
    assert list(obs) == ["a"] and rewards == {"a": pytest.approx(0.2)}
    obs, rewards, terminateds, truncateds, _ = env.step({"a": 0})
    assert set(obs) == {"a", "b"}
    assert rewards == {"a": pytest.approx(1.0), "b": pytest.approx(0.1 - 1.0)}
    assert terminateds == {"a": True, "b": True, "__all__": True}
    assert truncateds == {"a": False, "b": False, "__all__": False}
    assert env.env.agents == []

    with pytest.raises(errors.EnvError, match="the episode is over"):
        env.step({"a": 0})
    obs, _ = env.reset()
    assert list(obs) == ["a"]


def test_a_truncated_aec_episode_is_truncated_for_all():
    env = PettingZooEnv(countdown(start=20, max_moves=3))
    obs, _ = env.reset()
    seen = []
    while True:
        seen.append(list(obs))
        obs, rewards, terminateds, truncateds, _ = env.step({a: 0 for a in obs})
        if terminateds["__all__"] or truncateds["__all__"]:
            break
    assert seen == [["player_0"], ["player_1"], ["player_0"]]
    assert set(obs) == {"player_0", "player_1"}
    assert truncateds == {"player_0": True, "player_1": True, "__all__": True}
    assert terminateds == {"player_0": False, "player_1": False, "__all__": False}


def test_actions_off_turn_and_objects_of_the_wrong_kind_are_refused():
    env = PettingZooEnv(countdown())
    env.reset()
    with pytest.raises(errors.EnvError, match="waits for the action of agent 'player_0'"):
        env.step({"player_1": 0})
    with pytest.raises(errors.EnvError, match="player_0"):
        env.step({"player_0": 0, "player_1": 0})

    with pytest.raises(errors.InvalidEnvError, match=r"no \['possible_agents', 'reset'"):
        PettingZooEnv(object())
    # a parallel env is pointed at ParallelPettingZooEnv, and the other way round
    with pytest.raises(errors.InvalidEnvError, match=r"no \['last'\].*ParallelPettingZooEnv"):
        PettingZooEnv(Matching())
    with pytest.raises(errors.InvalidEnvError, match="AEC env.*wrap it in PettingZooEnv"):
        ParallelPettingZooEnv(countdown())
    assert ParallelPettingZooEnv(Matching()).action_space == spaces.Discrete(2)


def test_a_parallel_env_converted_to_aec_is_played_in_turns():
    from pettingzoo.utils.conversions import parallel_to_aec

    env = PettingZooEnv(parallel_to_aec(Matching()))
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_0"]
    obs, rewards, terminateds, _, _ = env.step({"player_0": 1})
    assert list(obs) == ["player_1"] and rewards == {"player_1": 0}
    assert terminateds == {"player_1": False, "__all__": False}
    # the cycle is complete: the parallel step runs, and both players get their reward
    obs, rewards, terminateds, _, _ = env.step({"player_1": 1})
    assert rewards == {"player_0": 1.0, "player_1": 1.0}
    assert terminateds == {"player_0": True, "player_1": True, "__all__": True}


def test_agents_with_different_spaces_have_no_shared_space():
    env = PettingZooEnv(countdown(heterogeneous=True))
    assert env.get_action_space("player_1") == spaces.Discrete(3)
    assert env.observation_space == env.get_observation_space("player_1")
    with pytest.raises(AttributeError, match="different action spaces"):
        env.action_space  # noqa: B018


def test_tictactoe_rewards_the_loser_who_did_not_move_last():
    tictactoe_v3 = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    env = PettingZooEnv(tictactoe_v3.env())
    obs, _ = env.reset(seed=0)
    assert list(obs) == ["player_1"] and set(obs["player_1"]) == {"observation", "action_mask"}
    # player_1 fills the left column (0, 1, 2) while player_2 plays 3 and 4
    moves = [("player_1", 0), ("player_2", 3), ("player_1", 1), ("player_2", 4),
             ("player_1", 2)]
    for agent, square in moves[:-1]:
        assert list(obs) == [agent]
        obs, rewards, terminateds, _, _ = env.step({agent: square})
        assert set(obs) == {"player_1", "player_2"} - {agent} and not terminateds["__all__"]
    obs, rewards, terminateds, truncateds, _ = env.step({"player_1": 2})
    assert rewards == {"player_1": 1, "player_2": -1}
    assert terminateds == {"player_1": True, "player_2": True, "__all__": True}
    assert truncateds["__all__"] is False


def test_pg_samples_and_trains_two_players_from_a_registered_creator(ray_session):
    from ray.tune.registry import register_env

    from tfrl.rllib.agents.pg import PGTrainer

    register_env("countdown", lambda config: PettingZooEnv(countdown(**config)))
    probe = PettingZooEnv(countdown())
    players = probe.possible_agents
    config = {"env": "countdown", "env_config": {"start": 5}, "num_workers": 0,
              "rollout_fragment_length": 20, "train_batch_size": 40,
              "batch_mode": "complete_episodes", "model": {"fcnet_hiddens": [8]}, "seed": 1,
              "multiagent": {"policies": {p: (None, probe.observation_space, probe.action_space,
                                              {}) for p in players},
                             "policy_mapping_fn": lambda agent_id: agent_id}}
    with PGTrainer(config=config) as trainer:
        before = {p: [w.copy() for w in trainer.get_policy(p).get_weights()] for p in players}
        result = trainer.train()
        after = {p: trainer.get_policy(p).get_weights() for p in players}
        # the runner's fragment (the worker's sample() writes into replay)
        batch = trainer.workers.local_worker().runner.sample()
    assert result["episodes_this_iter"] > 0 and result["timesteps_total"] >= 40
    assert set(result["info"]["learner"]) == set(players)
    assert set(result["policy_reward_mean"]) == set(players)
    for p in players:
        assert any(not np.allclose(b, a) for b, a in zip(before[p], after[p]))
    # a zero-sum game: the players' returns cancel out in every episode
    assert result["policy_reward_mean"]["player_0"] == pytest.approx(
        -result["policy_reward_mean"]["player_1"])

    # the rows of whole episodes: the players alternate (player_0 at even move counts), each
    # ends terminated, and the winner's +1 and the loser's -1 both arrive
    returns = defaultdict(dict)
    for p, rows in batch.policy_batches.items():
        moves = rows[SampleBatch.OBS][:, 1].astype(int)
        assert set(moves % 2) == {players.index(p)}
        for eps_id in np.unique(rows[SampleBatch.EPS_ID]):
            mine = rows[SampleBatch.EPS_ID] == eps_id
            terminated = rows[SampleBatch.TERMINATEDS][mine]
            assert terminated[-1] and not terminated[:-1].any()
            returns[eps_id][p] = rows[SampleBatch.REWARDS][mine].sum()
    assert returns and all(sorted(r.values()) == [-1.0, 1.0] for r in returns.values())


def test_the_classic_paths_name_tfrls_adapters():
    from tfrl.env import pettingzoo_env
    from tfrl.rllib.env import pettingzoo_env as classic

    assert PettingZooEnv is classic.PettingZooEnv is pettingzoo_env.PettingZooEnv
    assert ParallelPettingZooEnv is classic.ParallelPettingZooEnv \
        is pettingzoo_env.ParallelPettingZooEnv
