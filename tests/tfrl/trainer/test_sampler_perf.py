"""`sampler_perf` in the trainer result: RLlib's classic split of sampling time per env step."""
import math

import pytest

from tfrl.registry import get_trainer_class
from tfrl.rollout.metrics import RolloutMetrics, summarize_episodes

PERF_KEYS = {"mean_env_wait_ms", "mean_inference_ms", "mean_processing_ms"}


@pytest.mark.timeout(240)
def test_one_pg_iteration_reports_sampler_perf(ray_session, small_config):
    config = dict(small_config("PG"), batch_mode="complete_episodes")  # episodes surely end
    trainer = get_trainer_class("PG")(config=config, env="CartPole-v1")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["episodes_this_iter"] > 0
    perf = result["sampler_perf"]
    assert set(perf) == PERF_KEYS
    for name, value in perf.items():
        assert isinstance(value, float) and math.isfinite(value) and value > 0, (name, value)


def test_summarize_episodes_averages_the_perf_snapshots_of_episodes():
    def episode(perf):
        return RolloutMetrics(10, 1.0, {}, {}, {}, 0, perf)

    result = summarize_episodes([
        episode({"mean_env_wait_ms": 1.0, "mean_inference_ms": 2.0, "mean_processing_ms": 3.0}),
        episode({"mean_env_wait_ms": 3.0, "mean_inference_ms": 4.0, "mean_processing_ms": 5.0}),
    ])
    assert result["sampler_perf"] == {"mean_env_wait_ms": 2.0, "mean_inference_ms": 3.0,
                                      "mean_processing_ms": 4.0}
    assert summarize_episodes([])["sampler_perf"] == {}
