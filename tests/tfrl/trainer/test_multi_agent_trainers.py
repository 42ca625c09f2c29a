"""Multi-agent configs through the trainers, as examples/multi_agent.py uses them: several
policies, each with its own replay table and learner, `policies_to_train` respected, and
per-policy results (`policy_reward_mean`, `info.learner`). Real Ray rollout workers and the
trainer's embedded replay server."""
import importlib.util
import pathlib
import sys

import gymnasium as gym
import numpy as np
import pytest

from tfrl.registry import get_trainer_class

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "multi_agent.py"


@pytest.fixture(scope="module")
def example():
    """examples/multi_agent.py as a module whose functions Ray ships to workers by value."""
    from ray import cloudpickle

    spec = importlib.util.spec_from_file_location("multi_agent_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    yield module
    cloudpickle.unregister_pickle_by_value(module)
    del sys.modules[spec.name]


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
                                                                     example, algo):
    config = dict(small_config(algo), min_iter_time_s=0,
                  multiagent=example.cartpoles_multiagent(policies_to_train=["learner"]))
    trainer = get_trainer_class(algo)(config=config, env=example.TwoCartPoles)
    try:
        before = {pid: weights(trainer, pid) for pid in ("learner", "frozen")}
        for _ in range(2):
            result = trainer.train()
        after = {pid: weights(trainer, pid) for pid in ("learner", "frozen")}
        remote_frozen = remote_weights(trainer, "frozen")
        tables = set(trainer.replay.client().server_info()) if algo != "A3C" else set()
    finally:
        trainer.stop()
    assert changed(before["learner"], after["learner"]), "the policy to train did not learn"
    assert not changed(before["frozen"], after["frozen"]), "a policy outside policies_to_train changed"
    assert not changed(before["frozen"], remote_frozen)
    assert set(result["policy_reward_mean"]) == {"learner", "frozen"}
    assert 8 <= result["policy_reward_mean"]["frozen"] <= 500  # CartPole returns
    assert set(result["info"]["learner"]) == {"learner"}
    assert all(np.isfinite(v) for v in result["info"]["learner"]["learner"].values()
               if np.ndim(v) == 0)
    # one table per policy to train, none for the frozen one
    assert tables == {"PPO": {"rollouts_learner"}, "DQN": {"replay_learner"}, "A3C": set()}[algo]


def test_pettingzoo_adapter_ends_the_episode_for_all_agents(example):
    pytest.importorskip("pettingzoo")
    env = example.make_coins()
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
                                                                             small_config,
                                                                             example):
    pytest.importorskip("pettingzoo")
    config = dict(small_config("DQN"), multiagent=example.coins_multiagent())
    trainer = get_trainer_class("DQN")(config=config, env=example.make_coins)
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


@pytest.mark.timeout(300)
def test_example_script_runs_two_policies(ray_session, small_config, example):
    # 2 iterations of 32 steps per env: random CartPole episodes last about 20 steps, so an
    # episode of both copies has ended by then
    results = example.main("PPO", "cartpoles", iterations=2, verbose=False,
                           config=small_config("PPO"))
    assert set(results[-1]["policy_reward_mean"]) == {"learner", "frozen"}
    assert set(results[-1]["info"]["learner"]) == {"learner"}
