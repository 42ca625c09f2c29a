"""saving_experiences.py's loop on tfrl.rllib: rows of hand-stepped gymnasium episodes built
with the classic `SampleBatchBuilder` and written with the classic `JsonWriter`, read back by
tfrl's offline input."""
import glob
import os

import gymnasium as gym
import numpy as np

from tfrl.offline.input_reader import FileInput
from tfrl.rllib.evaluation import SampleBatchBuilder
from tfrl.rllib.models.preprocessors import get_preprocessor
from tfrl.rllib.offline.json_writer import JsonWriter

EPISODES = 6


def record(directory, episodes=EPISODES):
    """The script's loop with gymnasium's API (its only change beyond the one rewrite)."""
    batch_builder = SampleBatchBuilder()
    writer = JsonWriter(directory)
    env = gym.make("CartPole-v0")
    prep = get_preprocessor(env.observation_space)(env.observation_space)
    lengths = []
    for eps_id in range(episodes):
        obs, _ = env.reset(seed=eps_id)
        prev_action, prev_reward = np.zeros_like(env.action_space.sample()), 0
        done, t = False, 0
        while not done:
            action = env.action_space.sample()
            new_obs, rew, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            batch_builder.add_values(
                t=t, eps_id=eps_id, agent_index=0, obs=prep.transform(obs), actions=action,
                action_prob=1.0, rewards=rew, prev_actions=prev_action, prev_rewards=prev_reward,
                dones=done, infos=info, new_obs=prep.transform(new_obs))
            obs, prev_action, prev_reward = new_obs, action, rew
            t += 1
        lengths.append(t)
        assert batch_builder.count == t
        writer.write(batch_builder.build_and_reset())
        assert batch_builder.count == 0
    return lengths


def test_hand_built_batches_are_written_as_json_that_tfrls_input_reads(tmp_path):
    lengths = record(str(tmp_path / "demo-out"))
    files = glob.glob(os.path.join(tmp_path, "demo-out", "*.json"))
    assert len(files) == 1
    reader = FileInput(files)
    batches = [reader.next() for _ in range(EPISODES)]
    assert sorted(b.count for b in batches) == sorted(lengths)
    for batch in batches:
        assert batch["obs"].dtype == np.float32 and batch["obs"].shape == (batch.count, 4)
        np.testing.assert_array_equal(batch["t"], np.arange(batch.count))
        np.testing.assert_array_equal(batch["obs"][1:], batch["new_obs"][:-1])
        # one episode per batch, ending with its done: CartPole's failure is a termination
        assert batch["dones"][-1] and not batch["dones"][:-1].any()
        assert batch["terminateds"][-1] and not batch["truncateds"].any()
        assert np.all(batch["action_prob"] == 1.0) and np.all(batch["rewards"] == 1.0)


def test_the_builder_keeps_gymnasiums_flags_and_splits_classic_dones():
    builder = SampleBatchBuilder()
    builder.add_values(obs=[0.5], dones=True, infos={"TimeLimit.truncated": True})
    builder.add_values(obs=[1.5], dones=True, infos={})
    batch = builder.build_and_reset()
    assert batch["obs"].dtype == np.float32
    assert batch["truncateds"].tolist() == [True, False]
    assert batch["terminateds"].tolist() == [False, True]
    builder.add_values(obs=[0.0], terminateds=False, truncateds=True)
    batch = builder.build_and_reset()
    assert batch["truncateds"].tolist() == [True] and "dones" not in batch

