"""Short single-process learning checks on CartPole-v1 (real envs, real TensorFlow).

Each family must clearly improve on a random policy (mean return about 22) within a small
budget of env steps; thresholds leave room for run-to-run noise.
"""
import random

import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.a3c import A2C_DEFAULT_CONFIG, A3CTFPolicy
from tfrl.agents.dqn import DEFAULT_CONFIG as DQN_CONFIG
from tfrl.agents.dqn import DQNTFPolicy
from tfrl.agents.ppo import DEFAULT_CONFIG as PPO_CONFIG
from tfrl.agents.pg import DEFAULT_CONFIG as PG_CONFIG
from tfrl.agents.pg import PGTFPolicy
from tfrl.agents.ppo import PPOTFPolicy

from .agent_helpers import trainer_config
from .cartpole_loops import make_policy, train_dqn, train_on_policy


@pytest.fixture(autouse=True)
def fixed_global_seeds():
    """Global random state left by earlier tests must not decide whether learning succeeds."""
    tf.random.set_seed(0)
    np.random.seed(0)
    random.seed(0)


def mean_kl_update(policy, stats):
    policy.update_kl(sum(s["kl"] for s in stats) / len(stats))


# 43k env steps and 3,400 SGD steps: 73-105 s with the 2 cores at a load average of 18-25
@pytest.mark.timeout(600)
def test_ppo_learns_cartpole():
    config = trainer_config(PPO_CONFIG, lr=1e-3, lr_schedule=[[0, 1e-3], [100_000, 0.0]],
                            gamma=0.98, clip_param=0.2, entropy_coeff=0.0, kl_coeff=0.0,
                            vf_loss_coeff=0.5, model={"fcnet_hiddens": [64, 64]},
                            **{"lambda": 0.8})
    policy = make_policy(PPOTFPolicy, config, seed=0)
    result = train_on_policy(policy, num_envs=8, fragment_length=32, num_sgd_iter=20,
                             minibatch_size=256, max_env_steps=60_000, target_return=300,
                             after_iteration=mean_kl_update)
    assert result["best"] >= 300, result


@pytest.mark.timeout(120)
def test_a2c_improves_on_cartpole():
    config = trainer_config(A2C_DEFAULT_CONFIG, lr=3e-3, gamma=0.99, entropy_coeff=0.0,
                            vf_loss_coeff=0.5, grad_clip=0.5, model={"fcnet_hiddens": [64, 64]},
                            **{"lambda": 1.0})
    policy = make_policy(A3CTFPolicy, config, seed=0)
    result = train_on_policy(policy, num_envs=8, fragment_length=8, num_sgd_iter=1,
                             minibatch_size=64, max_env_steps=60_000, target_return=150)
    assert result["best"] >= 100, result


@pytest.mark.timeout(120)
def test_pg_improves_on_cartpole():
    config = trainer_config(PG_CONFIG, lr=4e-3, model={"fcnet_hiddens": [64, 64]})
    policy = make_policy(PGTFPolicy, config, seed=0)
    # 8 envs x 250 steps per batch; episodes cut at the batch end are summed without bootstrap
    result = train_on_policy(policy, num_envs=8, fragment_length=250, num_sgd_iter=1,
                             minibatch_size=2000, max_env_steps=60_000, target_return=150)
    assert result["best"] >= 100, result


# about 8k env steps: 12 s on a quiet machine, 41 s at a load average of 25
@pytest.mark.timeout(300)
def test_dqn_learns_cartpole():
    config = trainer_config(
        DQN_CONFIG, lr=1e-3, gamma=0.99, n_step=3, double_q=True, dueling=True,
        hiddens=[128], model={"fcnet_hiddens": [128], "fcnet_activation": "relu"},
        exploration_config={"initial_epsilon": 1.0, "final_epsilon": 0.01,
                            "epsilon_timesteps": 5000})
    policy = make_policy(DQNTFPolicy, config, seed=0)
    result = train_dqn(policy, num_envs=4, fragment_length=4, train_batch_size=64,
                       train_steps_per_round=8, learning_starts=1000, target_update_freq=1000,
                       max_env_steps=20_000, target_return=200)
    assert result["best"] >= 150, result
