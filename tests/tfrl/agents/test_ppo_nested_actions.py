"""PPO on a nested (Dict/Tuple) action space, end to end in one process: the catalog's
MultiActionDistribution, actions reaching the env as the space's nest (Box leaves clipped),
the batch's nested action column through postprocessing and the loss, and learning on a tiny
repeat-the-observation task."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.ppo.ppo import PPOTrainer
from tfrl.errors import UnsupportedSpaceError

Box, Dict, Discrete, Tuple = gym.spaces.Box, gym.spaces.Dict, gym.spaces.Discrete, gym.spaces.Tuple


class RepeatNestedEnv(gym.Env):
    """Observes a random element of its nested space and pays for repeating it: +1 for the
    matching Discrete leaf, minus the distance of the Box leaves (a bandit, 10 steps an episode).
    Every action it receives is recorded on the class (the test runs the env in-process)."""

    received = []
    SPACE = Dict({"choice": Discrete(3), "pair": Tuple([Box(-1.0, 1.0, (2,)), Discrete(2)])})

    def __init__(self, config=None):
        self.observation_space = self.action_space = self.SPACE
        self._rng = np.random.default_rng(0)

    def _observe(self):
        self._obs = {"choice": int(self._rng.integers(3)),
                     "pair": (self._rng.uniform(-1, 1, 2).astype(np.float32),
                              int(self._rng.integers(2)))}
        return self._obs

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._t = 0
        return self._observe(), {}

    def step(self, action):
        type(self).received.append(action)
        reward = (float(action["choice"] == self._obs["choice"])
                  + float(action["pair"][1] == self._obs["pair"][1])
                  - float(np.abs(action["pair"][0] - self._obs["pair"][0]).sum()))
        self._t += 1
        return self._observe(), reward, False, self._t >= 10, {}


CONFIG = {"num_workers": 0, "num_envs_per_worker": 2, "rollout_fragment_length": 50,
          "train_batch_size": 200, "sgd_minibatch_size": 50, "num_sgd_iter": 6, "lr": 3e-3,
          "gamma": 0.0, "entropy_coeff": 0.0, "vf_loss_coeff": 0.01,
          "model": {"fcnet_hiddens": [32]}, "seed": 1}


@pytest.mark.timeout(300)
def test_ppo_trains_on_a_nested_action_space_and_improves(tmp_path):
    RepeatNestedEnv.received.clear()
    trainer = PPOTrainer(config=dict(CONFIG), env=RepeatNestedEnv)
    try:
        results = [trainer.train() for _ in range(8)]
        stats = results[-1]["info"]["learner"]["default_policy"]
        for key in ("total_loss", "policy_loss", "kl", "entropy"):
            assert np.isfinite(stats[key]), key

        # every action the env saw has the space's structure and lies in it (Box leaf clipped)
        assert len(RepeatNestedEnv.received) >= 8 * 200
        for action in RepeatNestedEnv.received[::37]:
            assert set(action) == {"choice", "pair"} and isinstance(action["pair"], tuple)
            assert np.shape(action["pair"][0]) == (2,)
            assert RepeatNestedEnv.SPACE.contains(
                {"choice": int(action["choice"]),
                 "pair": (np.asarray(action["pair"][0], np.float32), int(action["pair"][1]))})

        # a random policy scores about 1/3 + 1/2 - 1.4 per step; learning beats the start
        first, last = results[0]["episode_reward_mean"], results[-1]["episode_reward_mean"]
        assert last > first + 5.0, (first, last)

        # the trainer's compute_action gives one nested action (Box leaf inside the bounds)
        obs, _ = RepeatNestedEnv().reset(seed=3)
        action = trainer.compute_action(obs, explore=False)
        assert set(action) == {"choice", "pair"} and np.shape(action["pair"][0]) == (2,)
        assert np.all(np.abs(action["pair"][0]) <= 1.0)

        # the SavedModel serves the nested actions as one output per leaf, clipped alike
        import tensorflow as tf

        serve = tf.saved_model.load(trainer.export_policy_model(str(tmp_path / "model")))
        out = serve.signatures["serving_default"](
            observations_choice=tf.constant([obs["choice"]], tf.int64),
            observations_pair_0=tf.constant(obs["pair"][0][None]),
            observations_pair_1=tf.constant([obs["pair"][1]], tf.int64))
        assert {"actions_choice", "actions_pair_0", "actions_pair_1",
                "deterministic_actions_pair_0"} <= set(out)
        assert int(out["deterministic_actions_choice"][0]) == int(action["choice"])
        np.testing.assert_allclose(out["deterministic_actions_pair_0"][0].numpy(),
                                   action["pair"][0], rtol=1e-5, atol=1e-6)
        assert np.all(np.abs(out["actions_pair_0"].numpy()) <= 1.0)
    finally:
        trainer.stop()


def test_policy_outputs_likelihoods_and_replay_signature_keep_the_action_nest():
    from tfrl.agents.ppo import PPOTFPolicy
    from tfrl.rollout.replay_output import replay_signature

    space = RepeatNestedEnv.SPACE
    policy = PPOTFPolicy(space, space, {"model": {"fcnet_hiddens": [8]}, "seed": 2})
    rows = [space.sample() for _ in range(5)]
    obs = {"choice": np.array([r["choice"] for r in rows]),
           "pair": (np.stack([r["pair"][0] for r in rows]),
                    np.array([r["pair"][1] for r in rows]))}
    actions, _, extras = policy.compute_actions(obs)
    assert actions["choice"].shape == (5,) and actions["pair"][0].shape == (5, 2)
    assert extras["action_dist_inputs"].shape == (5, 3 + 4 + 2)
    np.testing.assert_allclose(policy.compute_log_likelihoods(actions, obs),
                               extras["action_logp"], rtol=1e-5, atol=1e-5)
    _, outputs = policy.compute_outputs_of_actions(obs, actions)
    np.testing.assert_allclose(outputs["action_logp"], extras["action_logp"], rtol=1e-5,
                               atol=1e-5)

    # an application's logged action (external envs) replaces its row of the nest, and that
    # row's likelihood is recomputed
    from tfrl.rollout.trajectory import take_logged_actions

    logged = {"choice": 2, "pair": (np.array([0.25, -0.5], np.float32), 1)}
    mixed, mixed_extras = take_logged_actions(policy, {1: logged}, [1], obs, actions, extras)
    assert mixed["choice"][1] == 2 and mixed["pair"][1][1] == 1
    np.testing.assert_array_equal(mixed["pair"][0][1], [0.25, -0.5])
    np.testing.assert_array_equal(mixed["choice"][[0, 2, 3, 4]], actions["choice"][[0, 2, 3, 4]])
    expected = policy.compute_log_likelihoods(mixed, obs)
    np.testing.assert_allclose(mixed_extras["action_logp"][1], expected[1], rtol=1e-5)
    np.testing.assert_allclose(mixed_extras["action_logp"][0], extras["action_logp"][0])

    signature = replay_signature(policy)
    assert signature["actions"]["choice"].shape == ()
    assert signature["actions"]["pair"][0].shape == (2,)
    assert np.dtype(signature["actions"]["pair"][1].dtype) == np.int64


def test_a_nested_action_space_with_a_leaf_without_distribution_is_refused_by_name():
    from tfrl.agents.ppo import PPOTFPolicy

    bad = Tuple([Discrete(2), gym.spaces.MultiBinary(2)])
    with pytest.raises(UnsupportedSpaceError, match="MultiBinary"):
        PPOTFPolicy(Box(-1.0, 1.0, (2,)), bad, {})


@pytest.mark.timeout(300)
def test_remote_rollout_workers_send_nested_actions_to_the_learner(ray_session):
    trainer = PPOTrainer(config=dict(CONFIG, num_workers=1, num_cpus_per_worker=0,
                                     train_batch_size=100, num_sgd_iter=1),
                         env=RepeatNestedEnv)
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 100
        assert np.isfinite(result["info"]["learner"]["default_policy"]["total_loss"])
        # the samples went through the replay table (nested action column) to the learner;
        # the remote worker's envs got nests of the space's structure
        received = trainer.workers.foreach_worker(
            lambda w: type(w.foreach_env(lambda e: e.unwrapped)[0]).received[-5:],
            local_worker=False)[0]
        assert len(received) == 5
        summary = trainer.workers.foreach_worker(lambda w: w.sample(), local_worker=False)[0]
        assert sum(summary["items_written"].values()) > 0  # per policy
        for action in received:
            assert set(action) == {"choice", "pair"} and np.shape(action["pair"][0]) == (2,)
            assert np.all(np.abs(action["pair"][0]) <= 1.0)
    finally:
        trainer.stop()
