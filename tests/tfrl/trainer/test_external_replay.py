"""Trainers against an external `replay-server` (config `replay_address`).

The shipped examples/replay_tables.yaml serves the algorithms it names; a server without a
table a trainer needs, or with one that cannot serve it, is a clear error naming the table.
"""
import os

import numpy as np
import pytest

from replay import Server, Table, rate_limiters, selectors
from replay.specs import TensorSpec
from tests.replay.server.conftest import REPO_ROOT, ServerProcess
from tfrl import errors
from tfrl.agents.dqn.dqn import DQNTrainer
from tfrl.agents.ppo.ppo import PPOTrainer

SHIPPED_TABLES = os.path.join(REPO_ROOT, "examples", "replay_tables.yaml")


@pytest.fixture(scope="module")
def shipped_server():
    process = ServerProcess(SHIPPED_TABLES)
    yield process
    process.terminate()
    process.read_until_exit(timeout=60)
    process.kill()


@pytest.mark.timeout(150)
@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_trains_against_the_shipped_replay_tables(ray_session, small_config, shipped_server, algo):
    trainer_cls = {"PPO": PPOTrainer, "DQN": DQNTrainer}[algo]
    table = {"PPO": "rollouts", "DQN": "replay"}[algo]
    config = dict(small_config(algo), replay_address=shipped_server.address)
    trainer = trainer_cls(config=config, env="CartPole-v1")
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] > 0
        assert result["info"]["num_steps_trained"] > 0
        info = trainer.replay.client().server_info()[table]
        assert info.num_inserts >= result["timesteps_total"]  # the workers wrote into it
        assert info.num_samples > 0                           # the learner read from it
        assert not trainer.replay.embedded
    finally:
        trainer.stop()


def _dqn_against(tables, small_config, **overrides):
    server = Server(tables)
    try:
        config = dict(small_config("DQN"), replay_address=f"127.0.0.1:{server.port}", **overrides)
        with pytest.raises(errors.InvalidConfigError) as raised:
            DQNTrainer(config=config, env="CartPole-v1").stop()
        return str(raised.value)
    finally:
        server.stop(grace=None)


def _table(name, signature=None):
    return Table(name, selectors.Uniform(), selectors.Fifo(), 100, rate_limiters.MinSize(1),
                 signature=signature)


@pytest.mark.timeout(120)
def test_a_missing_table_is_named_with_its_yaml_entry(ray_session, small_config):
    message = _dqn_against([_table("other")], small_config)
    assert "no table(s) ['replay']" in message
    assert "name: replay" in message and "--config YAML" in message


@pytest.mark.timeout(120)
def test_a_table_with_another_signature_is_refused(ray_session, small_config):
    signature = {"obs": TensorSpec((4,), np.float32), "action": TensorSpec((), np.int64)}
    message = _dqn_against([_table("replay", signature)], small_config)
    assert "table 'replay'" in message
    assert "'actions'" in message and "'action'" in message
    assert "leave the signature out" in message


@pytest.mark.timeout(120)
def test_an_on_policy_queue_too_small_for_a_train_batch_is_refused(ray_session, small_config):
    server = Server([Table.queue("rollouts", 10)])
    try:
        config = dict(small_config("PPO"), replay_address=f"127.0.0.1:{server.port}")
        with pytest.raises(errors.InvalidConfigError) as raised:
            PPOTrainer(config=config, env="CartPole-v1").stop()
    finally:
        server.stop(grace=None)
    message = str(raised.value)
    # one train batch (64) plus one round (1 worker x 2 envs x 16 steps)
    assert "table 'rollouts'" in message and "max_size 10 is below the 96 steps" in message
    assert "{name: rollouts, kind: queue, max_size: " in message


def test_a_queue_check_without_num_workers_sizes_for_common_configs_two_workers():
    """A config that leaves num_workers out (an optimizer's own service over a WorkerSet's
    partial config) gets COMMON_CONFIG's two workers, like every component reading that config;
    sizing for one worker (the check's former default) would accept a queue that blocks them."""
    from tfrl.config import COMMON_CONFIG
    from tfrl.replay_hosting import ReplayService

    assert COMMON_CONFIG["num_workers"] == 2
    server = Server([Table.queue("rollouts", 100)])
    try:
        # one round: 2 workers x 2 envs x 16 steps = 64, plus a train batch of 64: 128 > 100
        service = ReplayService({"replay_address": f"127.0.0.1:{server.port}",
                                 "num_envs_per_worker": 2, "rollout_fragment_length": 16,
                                 "train_batch_size": 64})
        service.add_table(Table.queue("rollouts", 128))
        with pytest.raises(errors.InvalidConfigError, match="max_size 100 is below the 128 steps"):
            service.start()
    finally:
        server.stop(grace=None)
