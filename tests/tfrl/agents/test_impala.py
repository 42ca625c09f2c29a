"""IMPALA and APPO: the learner queue path (whole fragments, in order per worker, behaviour
logits kept), weights reaching the workers, and short end-to-end training runs; real Ray, real
replay server, real envs."""
import gymnasium as gym
import numpy as np
import pytest
import ray
import tf_keras as keras

from tfrl import errors
from tfrl.agents.impala import APPOTrainer, AsyncPPOTFPolicy, ImpalaTrainer
from tfrl.registry import get_trainer_class
from tfrl.learner.minibatch_buffer import MinibatchBuffer
from tfrl.policy import SampleBatch

FRAGMENT = 8


class CounterEnv(gym.Env):
    """Observations [worker_index, vector_index, step counter, step in episode]; the counter
    never resets, so a fragment's steps and the order of fragments can be read off the data.
    Episodes last 3, 7, 5, 3, 7, ... steps; every fourth one is truncated, the others terminate."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_config=None):
        self.worker = float(getattr(env_config, "worker_index", 0))
        self.vector = float(getattr(env_config, "vector_index", 0))
        self.counter, self.episodes, self.t = 0, 0, 0

    def _obs(self):
        return np.array([self.worker, self.vector, self.counter, self.t], np.float32)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.counter += 1
        self.t += 1
        length = (3, 7, 5)[self.episodes % 3]
        done = self.t >= length
        truncated = done and self.episodes % 4 == 3
        if done:
            self.episodes += 1
        return self._obs(), 1.0, done and not truncated, truncated, {}


def small_config(**overrides):
    config = {"num_workers": 2, "num_envs_per_worker": 2, "num_cpus_per_worker": 0,
              "rollout_fragment_length": FRAGMENT, "train_batch_size": 4 * FRAGMENT,
              "model": {"fcnet_hiddens": [16]}, "min_iter_time_s": 0, "seed": 3}
    config.update(overrides)
    return config


def test_fragments_reach_the_learner_whole_in_order_it_learns_and_workers_get_its_weights(
        ray_session):
    # as the README shows it, on an env whose observations tell where each step came from
    trainer = ImpalaTrainer(env=CounterEnv, config=small_config(
        lr=0.01, num_sgd_iter=2, minibatch_buffer_size=2))
    try:
        initial = trainer.get_policy().get_weights()
        check_queue_path(trainer)
        check_training(trainer, initial)
        check_weights_reach_workers(trainer, initial)
    finally:
        trainer.stop()


def test_appo_short_training_run_learns_on_whole_batches(ray_session):
    config = small_config(num_workers=1, num_sgd_iter=2, minibatch_buffer_size=2)
    trainer = APPOTrainer(env="CartPole-v1", config=config)
    try:
        check_training(trainer, trainer.get_policy().get_weights())
    finally:
        trainer.stop()


def test_impala_learns_with_the_papers_rmsprop_optimizer(ray_session):
    config = small_config(num_workers=1, num_sgd_iter=2, minibatch_buffer_size=2,
                          opt_type="rmsprop", decay=0.9, momentum=0.0,
                          epsilon=0.01, lr=0.01)
    trainer = ImpalaTrainer(env="CartPole-v1", config=config)
    try:
        optimizer = trainer.get_policy().optimizer
        assert isinstance(optimizer, keras.optimizers.RMSprop)
        assert (optimizer.rho, optimizer.epsilon) == (0.9, 0.01)
        check_training(trainer, trainer.get_policy().get_weights())
    finally:
        trainer.stop()


def check_queue_path(trainer):
    """Fragments reach the learner's input whole, in order per env of each worker, with their
    episode boundaries and the behaviour logits."""
    optimizer = trainer.optimizer
    remote = trainer.workers.remote_workers()
    rounds = 3
    for _ in range(rounds):  # the learner thread has not started: nothing consumes the queue
        ray.get([w.sample.remote() for w in remote])
    # the iterator the learner thread reads: batches of 4 fragments
    items = []
    for _ in range(rounds * len(remote) * 2 // 4):
        batch = next(optimizer.batches)
        for i in range(4):
            items.append({k: np.asarray(v[i]) for k, v in batch.items()})
    policy = trainer.get_policy()
    last_counter = {}
    for item in items:
        obs, new_obs = item[SampleBatch.OBS], item[SampleBatch.NEXT_OBS]
        assert obs.shape == (FRAGMENT, 4)
        source = (obs[0, 0], obs[0, 1])
        assert source[0] in (1.0, 2.0)  # a remote worker's env
        assert (obs[:, :2] == obs[0, :2]).all(), "a fragment mixes envs"
        counters = obs[:, 2]
        np.testing.assert_array_equal(counters, counters[0] + np.arange(FRAGMENT))
        # fragments of one env arrive in the order they were written, none missing
        assert counters[0] == last_counter.get(source, -FRAGMENT) + FRAGMENT
        last_counter[source] = counters[0]
        # episode boundaries: marked exactly where the next observation is a reset
        ended = item[SampleBatch.TERMINATEDS] | item[SampleBatch.TRUNCATEDS]
        np.testing.assert_array_equal(ended[:-1], obs[1:, 3] == 0)
        np.testing.assert_array_equal(new_obs[:, 2], counters + 1)
        # the behaviour logits are the ones the (unchanged) policy computes on those obs
        _, _, extra = policy.compute_actions(obs, explore=False)
        np.testing.assert_allclose(item[SampleBatch.ACTION_DIST_INPUTS],
                                   extra[SampleBatch.ACTION_DIST_INPUTS], rtol=1e-5, atol=1e-6)
    assert len(last_counter) == 4  # 2 workers x 2 envs
    assert {k: v for k, v in last_counter.items()} == {k: (rounds - 1) * FRAGMENT
                                                        for k in last_counter}
    assert any(i[SampleBatch.TRUNCATEDS].any() for i in items)
    assert any(i[SampleBatch.TERMINATEDS].any() for i in items)


def check_training(trainer, initial):
    """train() learns on whole batches, num_sgd_iter steps on each, and changes the weights."""
    result = {}
    while result.get("info", {}).get("num_steps_trained", 0) < 4 * 4 * FRAGMENT:
        result = trainer.train()
    info = result["info"]
    stats = info["learner"]["default_policy"]
    assert {"policy_loss", "vf_loss", "entropy", "mean_rho"} <= set(stats)
    assert 0.0 < stats["mean_rho"] < 10.0
    assert all(np.isfinite(v) for v in stats.values())
    assert info["num_steps_trained"] % (4 * FRAGMENT) == 0
    # two passes over each batch: half as many batches read as steps taken (give or take
    # the batches of the buffer still in use)
    assert info["num_batches_learned"] * 2 - info["learner_weights_version"] in (0, 1, 2)
    assert result["timesteps_total"] > 0 and result["episodes_this_iter"] >= 0
    assert any(not np.array_equal(a, b)
               for a, b in zip(trainer.get_policy().get_weights(), initial))


def check_weights_reach_workers(trainer, initial):
    """Once the learner stops, every worker ends up sampling with its final weights."""
    optimizer = trainer.optimizer
    remote = trainer.workers.remote_workers()
    while optimizer.learner.weights_version < 3:
        optimizer.step()
    optimizer.learner.stop(timeout=0)
    while optimizer.learner.is_alive():
        optimizer.step()  # the workers' writes let a blocked read return
    final = trainer.get_policy().get_weights()
    # every worker has been sent the final weights once one of its samples returned
    while not all(optimizer._worker_versions.get(w) == optimizer.learner.weights_version
                  for w in remote):
        optimizer.step()
    for worker in remote:
        weights = ray.get(worker.get_weights.remote())["default_policy"]
        for got, want in zip(weights, final):
            np.testing.assert_array_equal(got, want)
        assert any(not np.array_equal(w, b) for w, b in zip(weights, initial))
    assert optimizer.num_weight_broadcasts >= len(remote)


def test_registered_names():
    assert get_trainer_class("IMPALA") is ImpalaTrainer
    assert get_trainer_class("APPO") is APPOTrainer
    assert APPOTrainer._policy is AsyncPPOTFPolicy


def test_train_batch_must_be_whole_fragments():
    with pytest.raises(errors.InvalidConfigError, match="multiple of rollout_fragment_length"):
        get_trainer_class("IMPALA")(config=small_config(train_batch_size=30), env="CartPole-v1")
    with pytest.raises(errors.InvalidConfigError, match="truncate_episodes"):
        get_trainer_class("APPO")(config=small_config(batch_mode="complete_episodes"),
                                  env="CartPole-v1")
    with pytest.raises(errors.InvalidConfigError, match="opt_type must be"):
        get_trainer_class("IMPALA")(config=small_config(opt_type="sgd"), env="CartPole-v1")
    with pytest.raises(errors.InvalidConfigError, match="RMSProp's"):
        get_trainer_class("APPO")(config=small_config(opt_type="rmsprop", epsilon=0.0),
                                  env="CartPole-v1")


def test_minibatch_buffer_serves_each_batch_num_passes_times_interleaved():
    batches = iter(range(100))
    buffer = MinibatchBuffer(lambda: next(batches), size=2, num_passes=3)
    served = [buffer.get() for _ in range(8)]
    assert [b for b, _ in served] == [0, 1, 0, 1, 0, 1, 2, 3]
    assert [f for _, f in served] == [True, True, False, False, False, False, True, True]


def test_without_remote_workers_the_driver_samples_and_the_learner_thread_learns(ray_session):
    trainer = ImpalaTrainer(env="CartPole-v1", config=small_config(num_workers=0))
    try:
        result = {}
        while result.get("info", {}).get("num_steps_trained", 0) < 2 * 4 * FRAGMENT:
            result = trainer.train()
        assert result["timesteps_total"] >= result["info"]["num_steps_trained"]
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
    finally:
        trainer.stop()
