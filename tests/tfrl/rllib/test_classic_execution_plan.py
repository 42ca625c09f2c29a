"""Classic RLlib's execution-plan API (`ray.rllib.execution`) on tfrl: the iterator semantics,
the local replay buffer, and trainers built with `build_trainer(execution_plan=...)` over real
rollout workers and a gymnasium env."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.errors import InvalidConfigError, NotSupportedError
from tfrl.execution.local_iterator import LocalIterator, NextValueNotReady, from_items
from tfrl.rllib.agents.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG
from tfrl.rllib.agents.dqn.dqn_tf_policy import DQNTFPolicy
from tfrl.rllib.agents.dqn.dqn_torch_policy import DQNTorchPolicy  # noqa: F401 - imports
from tfrl.rllib.agents.ppo.ppo import DEFAULT_CONFIG as PPO_CONFIG
from tfrl.rllib.agents.ppo.ppo_tf_policy import PPOTFPolicy
from tfrl.rllib.agents.ppo.ppo_torch_policy import PPOTorchPolicy  # noqa: F401 - imports
from tfrl.rllib.agents.trainer_template import build_trainer
from tfrl.rllib.examples.env.multi_agent import MultiAgentCartPole
from tfrl.rllib.execution.common import STEPS_SAMPLED_COUNTER, _get_shared_metrics
from tfrl.rllib.execution.concurrency_ops import Concurrently
from tfrl.rllib.execution.metric_ops import StandardMetricsReporting
from tfrl.rllib.execution.replay_buffer import LocalReplayBuffer
from tfrl.rllib.execution.replay_ops import Replay, StoreToReplayBuffer
from tfrl.rllib.execution.rollout_ops import (ConcatBatches, ParallelRollouts, SelectExperiences,
                                              StandardizeFields)
from tfrl.rllib.execution.train_ops import TrainOneStep, UpdateTargetNetwork
from tfrl.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch
from tfrl.env.registry import register_env

TINY = {"fcnet_hiddens": [8]}


# --- iterators ------------------------------------------------------------------------------
def _source(name, n, not_ready_every=0):
    """Items name0..name{n-1}; a not-ready marker before every `not_ready_every`-th one."""
    def gen(_timeout=None):
        for i in range(n):
            if not_ready_every and i % not_ready_every == 0:
                yield NextValueNotReady()
            yield f"{name}{i}"
    return LocalIterator(gen, name=name)


def test_for_each_filter_combine_and_not_ready_markers_are_skipped_by_next():
    it = _source("a", 6, not_ready_every=2).for_each(str.upper).filter(lambda x: x != "A3")
    assert list(it) == ["A0", "A1", "A2", "A4", "A5"]
    pairs = from_items(range(5)).combine(lambda x: [x, x] if x % 2 else [])
    assert list(pairs) == [1, 1, 3, 3]
    assert from_items(range(5)).batch(2).take(3) == [[0, 1], [2, 3], [4]]


def test_round_robin_interleave_order_and_output_indexes():
    both = Concurrently([_source("a", 3), _source("b", 3)], mode="round_robin")
    assert list(both) == ["a0", "b0", "a1", "b1", "a2", "b2"]
    # async is the same fixed interleave in one process
    assert list(Concurrently([_source("a", 2), _source("b", 2)], mode="async")) == \
        ["a0", "b0", "a1", "b1"]
    # a source that is not ready is skipped for that round (a: not-ready, a0, a1, not-ready, a2, a3)
    skipping = Concurrently([_source("a", 4, not_ready_every=2), _source("b", 4)],
                            mode="round_robin")
    assert list(skipping) == ["b0", "a0", "b1", "a1", "b2", "b3", "a2", "a3"]
    weighted = Concurrently([_source("a", 4), _source("b", 2)], mode="round_robin",
                            round_robin_weights=[2, 1])
    assert list(weighted) == ["a0", "a1", "b0", "a2", "a3", "b1"]
    only_b = Concurrently([_source("a", 3), _source("b", 3)], mode="round_robin",
                          output_indexes=[1])
    assert list(only_b) == ["b0", "b1", "b2"]
    with pytest.raises(ValueError):
        Concurrently([_source("a", 1)])
    with pytest.raises(ValueError):
        Concurrently([_source("a", 1), _source("b", 1)], mode="parallel")


def test_duplicate_copies_move_in_lockstep_and_share_the_metrics():
    pulls = []

    def gen(_timeout=None):
        for i in range(4):
            pulls.append(i)
            _get_shared_metrics().counters["pulled"] += 1
            yield i

    left, right = LocalIterator(gen).duplicate(2)
    merged = Concurrently([left.for_each(lambda x: ("L", x)), right.for_each(lambda x: ("R", x))],
                          mode="round_robin")
    assert list(merged) == [("L", 0), ("R", 0), ("L", 1), ("R", 1), ("L", 2), ("R", 2),
                            ("L", 3), ("R", 3)]
    assert pulls == [0, 1, 2, 3]  # every item pulled once from the source
    assert merged.shared_metrics.get().counters["pulled"] == 4
    assert left.shared_metrics.get() is merged.shared_metrics.get()
    with pytest.raises(RuntimeError):
        _get_shared_metrics()  # only while a plan's iterator is pulled


# --- replay ---------------------------------------------------------------------------------
def _rows(n, start=0):
    return SampleBatch({"obs": np.arange(start, start + n, dtype=np.float32)[:, None],
                        "rewards": np.ones(n, np.float32)})


def test_replay_yields_nothing_before_learning_starts():
    buffer = LocalReplayBuffer(num_shards=1, learning_starts=20, buffer_size=30,
                               replay_batch_size=8)
    store = from_items([_rows(10, 0), _rows(10, 10), _rows(10, 20)]).for_each(
        StoreToReplayBuffer(local_buffer=buffer))
    replay = Replay(local_buffer=buffer)
    assert isinstance(replay.pull(), NextValueNotReady)
    flow = Concurrently([store, replay.for_each(lambda b: b.count)], mode="round_robin",
                        output_indexes=[1])
    # the first replayed batch comes in the round after the second store (20 steps)
    assert next(flow) == 8
    assert buffer.num_added == 20
    batch = buffer.replay()
    assert isinstance(batch, MultiAgentBatch) and batch.count == 8
    rows = batch.policy_batches["default_policy"]
    assert set(rows) >= {"obs", "weights", "batch_indexes"} and rows["obs"].max() < 20
    assert np.all(rows["weights"] <= 1.0) and np.isclose(rows["weights"].max(), 1.0)
    # a huge TD error makes that row the one replayed: with alpha 0.6, 1e9 weighs 2.5e5 against
    # the 19 other rows' 1 each, so 2 misses in 8 draws come once in about 6 million runs
    key = int(rows["batch_indexes"][0])
    buffer.update_priorities({"default_policy": (np.array([key]), np.array([1e9]))})
    again = buffer.replay().policy_batches["default_policy"]
    assert np.sum(again["batch_indexes"] == key) >= 7
    with pytest.raises(NotSupportedError):
        LocalReplayBuffer(1, 1, 10, 1, replay_mode="lockstep")
    with pytest.raises(NotSupportedError):
        Replay(actors=[object()])


def test_the_oldest_rows_leave_a_full_buffer():
    buffer = LocalReplayBuffer(num_shards=1, learning_starts=0, buffer_size=10,
                               replay_batch_size=50, prioritized_replay_alpha=0.0)
    for start in range(0, 30, 5):
        buffer.add_batch(_rows(5, start))
    replayed = buffer.replay().policy_batches["default_policy"]["obs"][:, 0]
    assert len(buffer) == 10 and replayed.min() >= 20


# --- trainers -------------------------------------------------------------------------------
def two_policy_workflow(workers, config):
    """Classic RLlib's two_trainer_workflow example, with small batches."""
    buffer = LocalReplayBuffer(num_shards=1, learning_starts=100, buffer_size=1000,
                               replay_batch_size=16)

    def count(name):
        def add(batch):
            _get_shared_metrics().counters[f"agent_steps_trained_{name}"] += batch.env_steps()
            return batch
        return add

    r1, r2 = ParallelRollouts(workers, mode="bulk_sync").duplicate(n=2)
    dqn_store = r1.for_each(SelectExperiences(["dqn_policy"])).for_each(
        StoreToReplayBuffer(local_buffer=buffer))
    dqn_replay = (Replay(local_buffer=buffer).for_each(count("DQN"))
                  .for_each(TrainOneStep(workers, policies=["dqn_policy"]))
                  .for_each(UpdateTargetNetwork(workers, target_update_freq=50,
                                                policies=["dqn_policy"])))
    dqn_train = Concurrently([dqn_store, dqn_replay], mode="round_robin", output_indexes=[1])
    ppo_train = (r2.for_each(SelectExperiences(["ppo_policy"]))
                 .combine(ConcatBatches(min_batch_size=40)).for_each(count("PPO"))
                 .for_each(StandardizeFields(["advantages"]))
                 .for_each(TrainOneStep(workers, policies=["ppo_policy"], num_sgd_iter=2,
                                        sgd_minibatch_size=32)))
    train = Concurrently([ppo_train, dqn_train], mode="async", output_indexes=[1])
    return StandardMetricsReporting(train, workers, config)


def _two_policy_config():
    register_env("exec_plan_cartpole", lambda _: MultiAgentCartPole({"num_agents": 4}))
    env = gym.make("CartPole-v1")
    tiny = {"model": {"fcnet_hiddens": [8]}}
    return {
        "env": "exec_plan_cartpole", "num_workers": 0, "rollout_fragment_length": 20,
        "multiagent": {
            "policies": {
                "ppo_policy": (PPOTFPolicy, env.observation_space, env.action_space,
                               dict(PPO_CONFIG, **tiny)),
                "dqn_policy": (DQNTFPolicy, env.observation_space, env.action_space,
                               dict(DQN_CONFIG, **tiny)),
            },
            "policy_mapping_fn": lambda agent_id: "ppo_policy" if agent_id % 2 == 0
            else "dqn_policy",
            "policies_to_train": ["dqn_policy", "ppo_policy"],
        },
    }


def test_a_two_policy_execution_plan_trains_both_policies(ray_session, tmp_path):
    trainer_cls = build_trainer(name="PPO_DQN_Test", default_policy=None,
                                execution_plan=two_policy_workflow)
    with trainer_cls(config=_two_policy_config()) as trainer:
        before = {pid: [w.copy() for w in trainer.get_policy(pid).get_weights()]
                  for pid in ("ppo_policy", "dqn_policy")}
        results = [trainer.train() for _ in range(3)]
        first, last = results[0], results[-1]
        # the first replay comes in the round that stores the 5th fragment (learning_starts
        # 100), then one result per fragment
        assert first["timesteps_total"] == 100 and last["timesteps_total"] == 140
        assert [r["timesteps_this_iter"] for r in results[1:]] == [20, 20]
        info = last["info"]
        assert info[STEPS_SAMPLED_COUNTER] == 140
        assert info["agent_steps_trained_DQN"] == 3 * 16
        assert info["agent_steps_trained_PPO"] >= 40
        assert info["num_steps_trained"] == info["agent_steps_trained_DQN"] + \
            info["agent_steps_trained_PPO"]
        assert info["num_target_updates"] >= 1
        assert "dqn_policy" in info["learner"]
        assert "episode_reward_mean" in last and last["episodes_total"] >= 1
        assert not np.isnan(last["episode_reward_mean"])
        assert "learn_time_ms" in last["timers"]
        for pid, weights in before.items():
            after = trainer.get_policy(pid).get_weights()
            assert any(not np.allclose(a, b) for a, b in zip(weights, after)), pid
        path = trainer.save(str(tmp_path))
    with trainer_cls(config=_two_policy_config()) as restored:
        restored.restore(path)
        assert restored.optimizer.num_steps_sampled == 140
        assert restored.optimizer.metrics.counters["agent_steps_trained_DQN"] == 3 * 16
        assert restored.train()["timesteps_total"] > 140


def one_policy_async_plan(workers, config):
    rollouts = ParallelRollouts(workers, mode="async")
    return StandardMetricsReporting(rollouts.for_each(TrainOneStep(workers)), workers, config)


def test_remote_workers_sample_and_get_the_trained_weights(ray_session):
    trainer_cls = build_trainer(name="AsyncPlan", default_policy=PPOTFPolicy,
                                default_config=PPO_CONFIG, execution_plan=one_policy_async_plan)
    config = {"env": "CartPole-v1", "num_workers": 1, "num_cpus_per_worker": 0,
              "rollout_fragment_length": 16, "model": TINY, "timesteps_per_iteration": 32}
    with trainer_cls(config=config) as trainer:
        result = trainer.train()
        assert result["timesteps_total"] >= 32 and result["num_healthy_workers"] == 1
        assert result["info"]["num_steps_trained"] == result["timesteps_total"]
        local = trainer.get_policy().get_weights()
        [remote] = trainer.workers.foreach_worker(
            lambda w: w.get_policy().get_weights(), local_worker=False)
        # the remote worker got the weights of the latest train step
        assert all(np.allclose(a, b) for a, b in zip(local, remote))
        # the other modes over the same remote worker
        workers = trainer.workers
        raw = ParallelRollouts(workers, mode="raw")
        assert raw.num_shards() == 1
        counts = raw.for_each(lambda batch: batch.count).gather_sync().take(2)
        assert counts == [16, 16]  # computed inside the worker
        bulk = ParallelRollouts(workers, mode="bulk_sync")
        assert next(bulk).count == 16
        assert bulk.shared_metrics.get().counters[STEPS_SAMPLED_COUNTER] == 16
        with pytest.raises(ValueError):
            ParallelRollouts(workers, mode="sync")


def test_classic_execution_paths_are_tfrls_objects():
    import tfrl.execution.concurrency_ops
    import tfrl.rllib.execution

    assert tfrl.rllib.execution.Concurrently is tfrl.execution.concurrency_ops.Concurrently
    assert tfrl.rllib.execution.TrainOneStep is TrainOneStep


def test_execution_plan_and_policy_optimizer_exclude_each_other():
    with pytest.raises(InvalidConfigError):
        build_trainer(name="Both", default_policy=PPOTFPolicy, execution_plan=one_policy_async_plan,
                      make_policy_optimizer=lambda workers, config: None)
