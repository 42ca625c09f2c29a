"""Every numeric result key lands in TensorBoard event files under the experiment's logdir."""
import glob
import json

import numpy as np
import pytest
import tensorflow as tf

from tfrl.agents.pg.pg import PGTrainer



def event_tags(logdir):
    tags, steps = set(), set()
    for path in glob.glob(f"{logdir}/events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                tags.add(value.tag)
                steps.add(event.step)
    return tags, steps


@pytest.mark.timeout(240)
def test_result_keys_learner_stats_and_return_histogram_are_written(ray_session, small_config, tmp_path):
    logdir = tmp_path / "PG_CartPole"
    trainer = PGTrainer(config=small_config("PG"), env="CartPole-v1", logdir=str(logdir))
    try:
        results = [trainer.train() for _ in range(3)]
    finally:
        trainer.stop()
    tags, steps = event_tags(logdir)
    for tag in ("episode_reward_mean", "timesteps_total", "time_this_iter_s", "info/num_steps_sampled",
                "info/learner/default_policy/policy_loss", "hist_stats/episode_reward"):
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    assert {r["timesteps_total"] for r in results} <= steps  # env steps are the x-axis
    lines = (logdir / "result.json").read_text().splitlines()
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2, 3]


def test_tensorboard_reads_the_values_and_histograms_of_each_result(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tfrl.logging import TensorBoardLogger

    returns = [[10.0, 30.0, 20.0], [55.0]]
    logger = TensorBoardLogger(str(tmp_path))
    for i, episodes in enumerate(returns):
        logger.log({"timesteps_total": 100 * (i + 1), "episode_reward_mean": float(np.mean(episodes)),
                    "done": False, "info": {"learner": {"default_policy": {"policy_loss": -0.25 * i}}},
                    "config": {"lr": 0.1}, "hist_stats": {"episode_reward": episodes}})
    logger.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    events.Reload()
    tags = set(events.Tags()["tensors"])
    assert {"episode_reward_mean", "done", "info/learner/default_policy/policy_loss",
            "hist_stats/episode_reward"} <= tags and not any(t.startswith("config") for t in tags)

    def series(tag):
        return [(e.step, tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)]

    assert [(s, float(v)) for s, v in series("episode_reward_mean")] == [(100, 20.0), (200, 55.0)]
    assert [float(v) for _, v in series("info/learner/default_policy/policy_loss")] == [0.0, -0.25]
    for (_, buckets), episodes in zip(series("hist_stats/episode_reward"), returns):
        # (left edge, right edge, count) rows: every episode counted once, within the range
        assert buckets.shape[1] == 3 and buckets[:, 2].sum() == len(episodes)
        assert buckets[0, 0] <= min(episodes) and buckets[-1, 1] >= max(episodes)
