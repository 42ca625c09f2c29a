"""DQN on image observations with its default model: the Q-network gets the vision network's
convolution stack, and the trainer learns from 84x84x3 frames through replay."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.agents.dqn import DQNTrainer


class BrightOrDark(gym.Env):
    """84x84x3 uint8 frames, all bright or all dark; action 1 is paid on bright frames, action 0
    on dark ones. Episodes last 8 steps."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_config=None):
        self._rng = np.random.default_rng(0)

    def _frame(self):
        self.bright = int(self._rng.integers(2))
        return np.full((84, 84, 3), 200 if self.bright else 20, np.uint8)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        reward = float(int(action) == self.bright)
        self.t += 1
        return self._frame(), reward, False, self.t >= 8, {}


@pytest.mark.timeout(300)
def test_dqn_trains_on_84x84x3_frames_with_its_default_model(ray_session):
    config = dict(num_workers=1, num_envs_per_worker=1, num_cpus_per_worker=0,
                  rollout_fragment_length=8, train_batch_size=16, learning_starts=32,
                  timesteps_per_iteration=48, buffer_size=500, hiddens=[16],
                  model={"conv_filters": [[4, [8, 8], 8], [8, [4, 4], 4]]})
    trainer = DQNTrainer(config=config, env=BrightOrDark)
    try:
        policy = trainer.get_policy()
        names = [v.name for v in policy.model.trainable_variables]
        assert any("conv_0" in n for n in names) and any("conv_1" in n for n in names)
        before = [w.copy() for w in policy.get_weights()]
        for _ in range(2):
            result = trainer.train()
        after = trainer.get_policy().get_weights()
        greedy = trainer.compute_action(np.full((84, 84, 3), 200, np.uint8))
    finally:
        trainer.stop()
    assert any(not np.allclose(b, a) for b, a in zip(before, after)), "the Q-network did not learn"
    stats = result["info"]["learner"]["default_policy"]
    assert np.isfinite(stats["mean_q"]) and np.isfinite(stats["mean_td_error"])
    assert trainer.optimizer.num_train_steps > 0
    assert greedy in (0, 1)
    assert 0 <= result["episode_reward_mean"] <= 8
