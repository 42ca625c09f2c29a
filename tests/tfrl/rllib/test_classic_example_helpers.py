"""tfrl's counterpart of classic RLlib's `examples.env.multi_agent` (`make_multiagent`,
`MultiAgentCartPole`): independent copies of a gymnasium env on gymnasium's API, the number of
agents from the env config, as the classic example scripts build them."""
import sys

import gymnasium as gym
import numpy as np
import pytest
import ray.cloudpickle

from tfrl.env.classic_api import ClassicEnvAdapter
from tfrl.env.registry import EnvContext
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rllib.examples.env.multi_agent import (BasicMultiAgent, MultiAgentCartPole,
                                                 MultiAgentPendulum, make_multiagent)

from tests.tfrl.rllib.test_classic_gym_api_envs import ClassicCorridor

pytestmark = pytest.mark.timeout(300)

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_multi_agent_cartpole_has_gymnasium_api_and_num_agents_from_config():
    env = MultiAgentCartPole({"num_agents": 3})
    assert env.possible_agents == [0, 1, 2]
    assert env.observation_space == gym.make("CartPole-v0").observation_space
    obs, infos = env.reset(seed=4)
    assert set(obs) == set(infos) == {0, 1, 2}
    assert all(env.observation_space.contains(o) for o in obs.values())
    # seeded copies: each its own seed, the same again on the same seed
    again, _ = MultiAgentCartPole({"num_agents": 3}).reset(seed=4)
    assert all(np.array_equal(obs[i], again[i]) for i in obs)
    assert not np.array_equal(obs[0], obs[1])
    assert len(MultiAgentCartPole({}).possible_agents) == 1  # classic default: one agent


def test_copies_end_independently_and_the_episode_when_all_have():
    env = MultiAgentCartPole({"num_agents": 2})
    env.reset(seed=0)
    active, steps = {0, 1}, 0
    while True:
        # agent 0 pushes one way only (falls within ~10 steps), agent 1 alternates
        actions = {i: (1 if i == 0 else steps % 2) for i in active}
        obs, rewards, terminateds, truncateds, infos = env.step(actions)
        steps += 1
        assert set(obs) == set(rewards) == active
        ended = {i for i in active if terminateds[i] or truncateds[i]}
        active -= ended
        if terminateds["__all__"] or truncateds["__all__"]:
            break
        assert active, "every agent ended but __all__ did not"
    assert not active and steps <= 200


def test_a_creator_gets_the_config_without_num_agents_and_classic_envs_adapted():
    seen = []

    def creator(config):
        seen.append((dict(config), config.worker_index))
        return ClassicCorridor(config)

    cls = make_multiagent(creator)
    env = cls(EnvContext({"num_agents": 2, "time_limit": True}, worker_index=3))
    assert seen == [({"time_limit": True}, 3)] * 2
    assert all(isinstance(e, ClassicEnvAdapter) for e in env.envs)
    obs, _ = env.reset()
    assert set(obs) == {0, 1}
    *_, terminateds, truncateds, _ = env.step({0: 1, 1: 1})
    assert not terminateds["__all__"] and not truncateds["__all__"]


def test_other_helpers_use_gymnasium_ids_and_mock_envs():
    pendulum = MultiAgentPendulum({"num_agents": 2})
    assert pendulum.action_space.shape == (1,)
    basic = BasicMultiAgent(3)
    obs, _ = basic.reset()
    assert obs == {0: 0, 1: 0, 2: 0}


def test_pg_trains_two_policies_on_multi_agent_cartpole(ray_session):
    single = gym.make("CartPole-v0")
    config = {"env": MultiAgentCartPole, "env_config": {"num_agents": 4}, "num_workers": 0,
              "rollout_fragment_length": 50, "train_batch_size": 200,
              "model": {"fcnet_hiddens": [8]},
              "multiagent": {"policies": {
                  p: (None, single.observation_space, single.action_space, {})
                  for p in ("even", "odd")},
                  "policy_mapping_fn": lambda agent: ["even", "odd"][agent % 2]}}
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
    assert result["timesteps_total"] >= 200
    assert set(result["info"]["learner"]) == {"even", "odd"}
    assert set(result["policy_reward_mean"]) == {"even", "odd"}


def test_parametric_actions_cartpole_hides_the_two_real_actions_and_steps_with_gymnasiums_api():
    from tfrl.rllib.examples.env.parametric_actions_cartpole import ParametricActionsCartPole

    env = ParametricActionsCartPole(10)
    obs, info = env.reset(seed=4)
    assert env.observation_space.contains(obs) and isinstance(info, dict)
    total, steps, terminated, truncated = 0.0, 0, False, False
    while not (terminated or truncated):
        valid = np.flatnonzero(obs["action_mask"])
        assert len(valid) == 2 and sorted(valid.tolist()) == sorted([env.left_idx, env.right_idx])
        # the invalid actions' embeddings are zero, the valid ones are LEFT's and RIGHT's
        assert not obs["avail_actions"][obs["action_mask"] == 0].any()
        np.testing.assert_allclose(obs["avail_actions"][env.left_idx], env.left_action_embed,
                                   rtol=1e-6)
        obs, reward, terminated, truncated, _ = env.step(int(valid[steps % 2]))
        total += reward
        steps += 1
    assert total == steps and (truncated == (steps == 200))  # CartPole-v0's 200-step limit
    env.reset()
    invalid = next(i for i in range(10) if i not in (env.left_idx, env.right_idx))
    with pytest.raises(ValueError, match="not one of the non-zero action embeddings"):
        env.step(invalid)
