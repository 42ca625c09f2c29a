"""Record -> read back -> learn, end to end through trainers on real Ray: a PPO trainer's
rollout worker records the batches it samples (TFRecord, lz4 columns), the files read back with
their behaviour probabilities, through a plain tf.data pipeline too, and BC and MARWIL trained
on them imitate the recording policy well enough to balance CartPole."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from tfrl.registry import get_trainer_class
from tfrl.offline import batch_record
from tfrl.offline.input_reader import read_file

# A linear CartPole controller that balances the pole for 500 steps: push right when
# 0.1 x + 0.5 x' + theta + theta' > 0. With no hidden layers, a policy's logits are
# obs @ kernel + bias, so this kernel makes the greedy policy exactly that controller.
TEACHER = np.array([0.1, 0.5, 1.0, 1.0], np.float32)
LINEAR = {"fcnet_hiddens": []}


def teacher_weights(policy):
    kernel, bias, *value = policy.get_weights()
    kernel = np.zeros_like(kernel)
    kernel[:, 1] = 10.0 * TEACHER
    return [kernel, np.zeros_like(bias), *value]


@pytest.fixture(scope="module")
def recorded_dir(ray_session, tmp_path_factory):
    """1000 steps of the teacher, acting greedily, recorded by a PPO trainer's worker (the
    driver's own; remote workers record in test_off_policy_estimation and the README test)."""
    out = str(tmp_path_factory.mktemp("recorded"))
    trainer = get_trainer_class("PPO")(config={
        "env": "CartPole-v1", "num_workers": 0, "explore": False,
        "model": LINEAR, "rollout_fragment_length": 250, "train_batch_size": 1000,
        "sgd_minibatch_size": 1000, "num_sgd_iter": 1, "lr": 0.0, "seed": 3,
        "output": out, "output_max_file_size": 30_000})
    try:
        trainer.get_policy().set_weights(teacher_weights(trainer.get_policy()))
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["timesteps_total"] == 1000
    return out


def recorded_batches(directory):
    return [b for path in sorted(glob.glob(os.path.join(directory, "*.tfrecord")))
            for b in read_file(path)]


def test_every_sampled_row_is_recorded_with_its_behaviour_probability(recorded_dir):
    files = glob.glob(os.path.join(recorded_dir, "*"))
    assert len(files) >= 2, "output_max_file_size did not rotate the files"
    assert all("_worker-0_" in os.path.basename(f) and f.endswith(".tfrecord") for f in files)
    batches = recorded_batches(recorded_dir)
    assert sum(b.count for b in batches) == 1000
    rows = {k: np.concatenate([b[k] for b in batches]) for k in ("obs", "actions", "action_logp",
                                                                 "action_prob", "new_obs")}
    teacher_actions = (rows["obs"] @ TEACHER > 0).astype(np.int64)
    np.testing.assert_array_equal(rows["actions"], teacher_actions)
    np.testing.assert_allclose(rows["action_prob"], np.exp(rows["action_logp"]), rtol=1e-5)
    assert np.all(rows["action_prob"] > 0.5)  # greedy actions are the likelier ones
    # lz4 is tried on obs and new_obs (kept raw when it saves nothing), never on the others
    record = next(iter(tf.data.TFRecordDataset(sorted(files)[0]))).numpy()
    layout = {e["name"]: e for e in batch_record.column_layout(record)}
    assert not any(layout[c]["compressed"] for c in layout if c not in ("obs", "new_obs"))


def test_a_plain_tf_data_pipeline_reads_the_raw_columns(recorded_dir):
    path = sorted(glob.glob(os.path.join(recorded_dir, "*.tfrecord")))[0]
    features = {"tfrl/count": tf.io.FixedLenFeature([], tf.int64),
                "col/rewards": tf.io.FixedLenFeature([], tf.string),
                "col/actions": tf.io.FixedLenFeature([], tf.string)}
    parsed = next(iter(tf.data.TFRecordDataset(path).map(
        lambda r: tf.io.parse_single_example(r, features))))
    rewards = tf.io.decode_raw(parsed["col/rewards"], tf.float32)
    actions = tf.io.decode_raw(parsed["col/actions"], tf.int64)
    first = next(read_file(path))
    assert int(parsed["tfrl/count"]) == first.count
    np.testing.assert_array_equal(rewards.numpy(), first["rewards"])
    np.testing.assert_array_equal(actions.numpy(), first["actions"])


def test_offline_dataset_feeds_a_mirrored_strategy(recorded_dir):
    from tfrl.offline import offline_dataset

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    dataset = offline_dataset(recorded_dir, batch_size=100, columns=["obs", "actions"], seed=0)
    distributed = iter(strategy.experimental_distribute_dataset(dataset))
    element = next(distributed)
    per_replica = strategy.experimental_local_results(element["obs"])
    assert [t.shape.as_list() for t in per_replica] == [[50, 4], [50, 4]]
    obs = np.concatenate([t.numpy() for t in per_replica])
    actions = np.concatenate([t.numpy() for t in strategy.experimental_local_results(
        element["actions"])])
    # rows keep their columns together through shuffling and splitting
    np.testing.assert_array_equal(actions, (obs @ TEACHER > 0).astype(np.int64))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algorithm", ["BC", "MARWIL"])
def test_bc_and_marwil_learn_the_recorded_policy(recorded_dir, algorithm):
    trainer = get_trainer_class(algorithm)(config={
        "env": "CartPole-v1", "input": recorded_dir, "model": LINEAR, "lr": 0.03,
        "train_batch_size": 500, "sgd_minibatch_size": 100, "num_sgd_iter": 30, "seed": 0,
        "evaluation_interval": 3, "evaluation_num_episodes": 2})
    try:
        for _ in range(3):
            result = trainer.train()
        batches = recorded_batches(recorded_dir)
        obs = np.concatenate([b["obs"] for b in batches])
        actions = np.concatenate([b["actions"] for b in batches])
        greedy, _, _ = trainer.get_policy().compute_actions(obs, explore=False)
    finally:
        trainer.stop()
    assert result["info"]["num_steps_sampled"] == 1500  # rows read from the files
    assert result["episodes_this_iter"] == 0  # nothing was played to train
    # the teacher keeps w.obs near 0, so a third of the rows sit on its decision boundary; away
    # from it the learned policy chooses as the teacher did
    clear = np.abs(obs @ TEACHER) > 0.05
    assert clear.sum() > 300
    assert np.mean(greedy[clear] == actions[clear]) >= 0.95
    # the learned policy, played greedily in the env, balances far longer than a random one (~22)
    assert result["evaluation"]["episode_reward_mean"] >= 150
