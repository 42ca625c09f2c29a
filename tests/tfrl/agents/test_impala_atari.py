"""IMPALA on a real Atari game (ALE/Pong-v5 through tfrl.env.atari): frames travel lz4-compressed
through the learner queue, each stored once (new_obs only at episode and fragment ends), the
trainer reports the compression ratio the queue table achieved, and the learner trains a small
conv net on them; real Ray, real replay server."""
import numpy as np
import pytest

from tfrl.agents.impala import ImpalaTrainer

TINY_CONV = {"conv_filters": [[8, [8, 8], 4], [16, [4, 4], 4]], "post_fcnet_hiddens": [32]}


@pytest.mark.timeout(300)
def test_impala_learns_on_pong_frames_and_reports_the_replay_compression_ratio(ray_session):
    config = dict(num_workers=1, num_envs_per_worker=1, num_cpus_per_worker=0,
                  rollout_fragment_length=20, train_batch_size=40, learner_queue_size=8,
                  min_iter_time_s=0, model=TINY_CONV)
    trainer = ImpalaTrainer(config=config, env="ALE/Pong-v5")
    try:
        policy = trainer.get_policy()
        assert policy.observation_space.shape == (84, 84, 4)
        assert policy.observation_space.dtype == np.uint8
        before = [w.copy() for w in policy.get_weights()]
        for _ in range(60):
            result = trainer.train()
            if result["info"]["num_steps_trained"] >= 80:
                break
        after = trainer.get_policy().get_weights()
    finally:
        trainer.stop()
    info = result["info"]
    assert info["num_steps_trained"] >= 80, "the learner did not train on two batches"
    assert any(not np.allclose(b, a) for b, a in zip(before, after)), "the weights did not move"
    replay = info["replay"]
    assert replay["chunks_inserted"] >= 2
    # raw frames of 84x84x4 bytes per obs: the stored bytes are what lz4 left of them
    assert replay["column_raw_bytes"]["obs"] == replay["chunks_inserted"] * 20 * 84 * 84 * 4
    assert replay["compression_ratio"] == pytest.approx(
        replay["chunk_raw_bytes_inserted"] / replay["chunk_bytes_inserted"])
    # the paper's "more than an order of magnitude" for frames
    assert replay["compression_ratio"] > 10
    # new_obs is stored only where the fragment's obs cannot give it (episode and fragment
    # ends): its column costs a fraction of obs's, the rest are zero rows
    assert replay["column_bytes"]["new_obs"] < 0.5 * replay["column_bytes"]["obs"]
