"""Small, fast trainer configs shared by the trainer tests."""
import pytest

# min_iter_time_s 0: A2C's and A3C's defaults (10 s, 5 s) would make each iteration wait
SMALL = {"num_workers": 1, "num_envs_per_worker": 2, "num_cpus_per_worker": 0,
         "model": {"fcnet_hiddens": [16]}, "min_iter_time_s": 0}

ALGO_CONFIGS = {
    "PG": dict(SMALL, rollout_fragment_length=20, train_batch_size=40),
    "A2C": dict(SMALL, rollout_fragment_length=10, train_batch_size=20),
    "A3C": dict(SMALL, rollout_fragment_length=10, grads_per_step=3),
    "PPO": dict(SMALL, rollout_fragment_length=16, train_batch_size=64, sgd_minibatch_size=32,
                num_sgd_iter=2),
    "DQN": dict(SMALL, rollout_fragment_length=4, train_batch_size=16, learning_starts=32,
                timesteps_per_iteration=64, buffer_size=1000, prioritized_replay=True),
}


@pytest.fixture
def small_config():
    return lambda algo: {k: (dict(v) if isinstance(v, dict) else v) for k, v in ALGO_CONFIGS[algo].items()}
