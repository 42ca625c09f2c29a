"""Classic multi-agent envs without per-agent space dicts: a policy's spaces come from its spec,
else from the env's shared `observation_space` / `action_space` (as classic RLlib's rollout
worker did), and a named error says which policy lacks which space when neither gives one."""
import sys

import gymnasium as gym
import numpy as np
import pytest
import ray.cloudpickle

from tfrl import errors
from tfrl.env.checks import check_env
from tfrl.optimizers.sync_replay_optimizer import _agents_of_policy
from tfrl.rllib.agents.pg import PGTrainer
from tfrl.rllib.agents.pg.pg_tf_policy import PGTFPolicy
from tfrl.rllib.env.multi_agent_env import MultiAgentEnv
from tfrl.rllib.evaluation.rollout_worker import RolloutWorker

pytestmark = pytest.mark.timeout(300)

# the trainer's remote worker builds this module's env: Ray ships it by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

MODEL = {"fcnet_hiddens": [8]}


class SharedSpacesGame(MultiAgentEnv):
    """Classic form: one `observation_space` / `action_space` for both agents, no dicts, no
    `possible_agents`. Agents "x" and "y" see a 3-value one-hot of the step; an episode lasts
    3 steps; an agent earns 1 when its action equals the step's parity."""

    action_space = gym.spaces.Discrete(2)  # a class attribute, as TwoStepGame's

    def __init__(self, config=None):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)

    def _obs(self):
        one_hot = np.eye(3, dtype=np.float32)[self.t]
        return {"x": one_hot, "y": one_hot}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        rewards = {a: float(int(action) == self.t % 2) for a, action in action_dict.items()}
        self.t += 1
        done = self.t >= 3
        obs = self._obs() if not done else {a: np.zeros(3, np.float32) for a in action_dict}
        return obs, rewards, {"__all__": done}, {"__all__": False}, {}


class NoSpacesGame(SharedSpacesGame):
    """Declares no spaces at all: the policy specs must give them."""

    action_space = None

    def __init__(self, config=None):
        pass


OBS = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)


def by_agent(agent_id):
    return "px" if agent_id == "x" else "py"


def make_worker(env_cls, policies, **config):
    return RolloutWorker(env_cls, policies, dict({"rollout_fragment_length": 6,
                                                  "model": MODEL}, **config),
                         policy_mapping_fn=by_agent)


def test_none_spaces_of_a_spec_come_from_the_envs_shared_spaces():
    worker = make_worker(SharedSpacesGame, {"px": (PGTFPolicy, None, None, {}),
                                            "py": (PGTFPolicy, OBS, None, {})})
    for pid in ("px", "py"):
        policy = worker.policy_map[pid]
        assert policy.observation_space == OBS and policy.action_space == ACT
    batch = worker.sample()
    assert batch.env_steps() == 6
    assert batch.policy_batches["px"].count == 6 and batch.policy_batches["py"].count == 6
    assert worker.known_agent_ids() == ["x", "y"]  # the env declares none: the agents seen


def test_the_spec_wins_over_a_shared_space_that_differs():
    """Classic RLlib never compared a spec's spaces with the env's single ones (a centralized
    critic's policy observes more than the env's `observation_space` says)."""
    wide = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
    worker = make_worker(SharedSpacesGame, {"px": (PGTFPolicy, wide, ACT, {}),
                                            "py": (PGTFPolicy, None, None, {})})
    assert worker.policy_map["px"].observation_space == wide
    assert worker.policy_map["py"].observation_space == OBS


def test_an_env_without_spaces_runs_on_the_spaces_of_the_specs():
    worker = make_worker(NoSpacesGame, {"px": (PGTFPolicy, OBS, ACT, {}),
                                        "py": (PGTFPolicy, OBS, ACT, {})})
    assert worker.sample().env_steps() == 6


@pytest.mark.parametrize("spec, missing", [((None, ACT), "observation"),
                                           ((OBS, None), "action"),
                                           ((None, None), "observation and action")])
def test_a_space_neither_the_spec_nor_the_env_gives_is_a_named_error(spec, missing):
    with pytest.raises(errors.InvalidConfigError,
                       match=f"the {missing} space of policy 'py' is unknown"):
        make_worker(NoSpacesGame, {"px": (PGTFPolicy, OBS, ACT, {}),
                                   "py": (PGTFPolicy, *spec, {})})


def test_per_agent_lookups_fall_back_to_the_shared_spaces():
    env = SharedSpacesGame()
    check_env(env, "shared")
    assert env.get_observation_space("x") == OBS and env.get_action_space("y") == ACT
    with pytest.raises(errors.UnsupportedSpaceError, match="no observation space for agent 'x'"):
        NoSpacesGame().get_observation_space("x")


def test_a_shared_space_that_is_no_gymnasium_space_is_refused():
    env = SharedSpacesGame()
    env.observation_space = (3,)
    with pytest.raises(errors.InvalidEnvError, match="shared observation space"):
        check_env(env, "bad")


def test_the_replay_estimate_counts_the_agents_seen_of_a_classic_env():
    worker = make_worker(SharedSpacesGame, {"px": (PGTFPolicy, None, None, {}),
                                            "py": (PGTFPolicy, None, None, {})},)
    worker.policy_mapping_fn = lambda agent_id: "px"
    assert _agents_of_policy(worker, "px") == 2 and _agents_of_policy(worker, "py") == 1


def test_a_classic_multi_agent_env_trains_an_iteration_on_a_remote_worker(ray_session):
    config = {"env": SharedSpacesGame, "num_workers": 1, "rollout_fragment_length": 6,
              "train_batch_size": 12, "model": MODEL,
              "multiagent": {"policies": {"px": (None, OBS, ACT, {}),
                                          "py": (None, None, None, {})},
                             "policy_mapping_fn": by_agent}}
    with PGTrainer(config=config) as trainer:
        result = trainer.train()
        local = trainer.workers.local_worker()
        assert local.policy_map["py"].observation_space == OBS
        assert local.policy_map["py"].action_space == ACT
    assert result["timesteps_total"] >= 12
    assert result["episodes_total"] >= 4
    assert 0.0 <= result["episode_reward_mean"] <= 6.0
