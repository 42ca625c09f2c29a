"""Every numeric result key lands in TensorBoard event files under the experiment's logdir."""
import glob
import json

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
