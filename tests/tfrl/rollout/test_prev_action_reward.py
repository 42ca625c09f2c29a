"""Model config `lstm_use_prev_action_reward` (classic RLlib's key): the LSTM reads the previous
action and reward beside the features, its policy takes them when acting, and env runners
record them for the loss; on real PPO policies, gymnasium envs and rollout workers."""
import gymnasium as gym
import numpy as np
import pytest
import tree

from tfrl.agents.ppo.ppo_policy import PPOTFPolicy
from tfrl.policy.sample_batch import SampleBatch
from tfrl.env import ExternalEnv, make_multi_agent
from tfrl.rollout import RolloutWorker

pytestmark = pytest.mark.timeout(120)

LSTM = {"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 4}
PREV = dict(LSTM, lstm_use_prev_action_reward=True)
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def lstm_kernel(policy):
    return next(v for v in policy.model.trainable_variables
                if "lstm" in v.name and "recurrent" not in v.name and "kernel" in v.name)


@pytest.mark.parametrize("action_space, encoded", [
    (gym.spaces.Discrete(3), 3 + 1),  # one-hot action, reward
    (gym.spaces.Box(-1.0, 1.0, (2,), np.float32), 2 + 1),
])
def test_the_lstm_input_grows_by_the_encoded_previous_action_and_reward(action_space, encoded):
    plain = PPOTFPolicy(OBS_SPACE, action_space, {"model": LSTM})
    with_prev = PPOTFPolicy(OBS_SPACE, action_space, {"model": PREV})
    assert not plain.reads_prev_action_reward and with_prev.reads_prev_action_reward
    assert lstm_kernel(with_prev).shape[0] == lstm_kernel(plain).shape[0] + encoded
    assert {"prev_actions", "prev_rewards"} <= set(with_prev.loss_input_signature)
    assert not {"prev_actions", "prev_rewards"} & set(plain.loss_input_signature)


def test_actions_and_values_depend_on_the_previous_action_and_reward():
    policy = PPOTFPolicy(OBS_SPACE, gym.spaces.Discrete(3), {"model": PREV, "seed": 1})
    obs = np.zeros((3, 4), np.float32)

    def outputs(prev_actions, prev_rewards):
        _, _, extra = policy.compute_actions(obs, prev_action_batch=np.array(prev_actions),
                                             prev_reward_batch=np.array(prev_rewards),
                                             explore=False)
        return extra["action_dist_inputs"], extra["vf_preds"]

    logits, values = outputs([0, 1, 2], [0.0, 0.0, 0.0])
    # same observation and state: the rows differ by their previous action only
    assert not np.allclose(logits[0], logits[1], atol=1e-6)
    assert not np.allclose(logits[1], logits[2], atol=1e-6)
    rewarded_logits, rewarded_values = outputs([0, 1, 2], [1.0, 1.0, 1.0])
    assert not np.allclose(rewarded_values, values, atol=1e-6)
    assert not np.allclose(rewarded_logits, logits, atol=1e-6)
    # none given: zeros, as at an episode's first step
    _, _, default = policy.compute_actions(obs, explore=False)
    np.testing.assert_allclose(default["action_dist_inputs"][0], logits[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        policy.compute_values(obs, None, np.array([0, 1, 2]), np.array([1.0, 1.0, 1.0])),
        rewarded_values, rtol=1e-5, atol=1e-6)


def assert_rows_follow_their_previous_step(rows):
    for piece in rows.split_by_episode():
        starts = piece["t"] == 0
        assert not piece["prev_actions"][starts].any() and not piece["prev_rewards"][starts].any()
        np.testing.assert_array_equal(piece["prev_actions"][1:], piece["actions"][:-1])
        np.testing.assert_array_equal(piece["prev_rewards"][1:], piece["rewards"][:-1])


def test_rollout_rows_carry_the_previous_action_and_reward_and_the_loss_learns_from_them():
    worker = RolloutWorker("CartPole-v1", PPOTFPolicy, {
        "model": PREV, "rollout_fragment_length": 60, "num_envs_per_worker": 2, "seed": 2,
        "gamma": 0.9, "lr": 0.01})
    try:
        batch = worker.sample()
        policy = worker.get_policy()
        assert_rows_follow_their_previous_step(batch)
        assert batch["prev_actions"][batch["t"] > 0].any()  # CartPole rewards 1 every step
        # a piece cut before its episode ended bootstraps from the value of the step after its
        # last row, whose previous action and reward are that row's
        cut = [p for p in batch.split_by_episode()
               if not (p["terminateds"][-1] or p["truncateds"][-1])]
        assert cut
        for piece in cut:
            states = [piece["state_out_0"][-1:], piece["state_out_1"][-1:]]
            last_value = policy.compute_values(piece["new_obs"][-1:], states,
                                               piece["actions"][-1:], piece["rewards"][-1:])[0]
            assert piece["value_targets"][-1] == pytest.approx(
                piece["rewards"][-1] + 0.9 * last_value, rel=1e-4, abs=1e-4)
        kernel = lstm_kernel(policy)
        features = kernel.shape[0] - (2 + 1)
        before = kernel.numpy()[features:].copy()
        policy.learn_on_batch(batch)
        # the LSTM weights of the previous action and reward inputs received gradients
        assert not np.allclose(kernel.numpy()[features:], before)
    finally:
        worker.stop()


def test_multi_agent_rows_carry_each_agents_previous_action_and_reward():
    env_class = make_multi_agent(lambda _config: gym.make("CartPole-v1"), num_agents=2)
    worker = RolloutWorker(env_class, PPOTFPolicy, {
        "model": PREV, "rollout_fragment_length": 30, "seed": 4})
    try:
        rows = worker.sample().policy_batches["default_policy"]
    finally:
        worker.stop()
    assert set(rows["agent_index"].tolist()) == {0, 1}
    for agent in (0, 1):
        mask = rows["agent_index"] == agent
        assert_rows_follow_their_previous_step(
            SampleBatch({k: tree.map_structure(lambda a: a[mask], v) for k, v in rows.items()}))


class CartPoleServedOutside(ExternalEnv):
    """CartPole run by an application: it asks for actions, except every third step, whose
    action it logs (always 1); rewards 1 per step."""

    def __init__(self, _ctx=None):
        self.cartpole = gym.make("CartPole-v1")
        super().__init__(self.cartpole.action_space, self.cartpole.observation_space)

    def run(self):
        seed = 0
        while not self.closed:
            episode = self.start_episode()
            obs, _ = self.cartpole.reset(seed=seed)
            seed += 1
            for t in range(500):
                if t % 3 == 2:
                    action = 1
                    self.log_action(episode, obs, action)
                else:
                    action = self.get_action(episode, obs)
                obs, reward, terminated, truncated, _ = self.cartpole.step(action)
                self.log_returns(episode, reward)
                if terminated or truncated:
                    break
            self.end_episode(episode, obs, truncated=not terminated)


def test_external_env_rows_carry_the_previous_action_and_reward():
    worker = RolloutWorker(CartPoleServedOutside, PPOTFPolicy, {
        "model": PREV, "rollout_fragment_length": 40, "seed": 3,
        "batch_mode": "complete_episodes"})
    try:
        batch = worker.sample()
    finally:
        worker.stop()
    assert_rows_follow_their_previous_step(batch)
    later = batch["t"] > 0
    assert batch["prev_rewards"][later].all()  # every CartPole step earns 1
    logged_next = (batch["t"] % 3 == 0) & later  # the step after a logged one
    assert (batch["prev_actions"][logged_next] == 1).all()
