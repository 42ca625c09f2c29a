"""Trainers run unchanged as Ray Tune trainables: a small grid search."""
import pytest

from tfrl.tune import as_trainable


@pytest.mark.timeout(300)
def test_grid_search_over_the_learning_rate(ray_session, small_config, tmp_path):
    from ray import tune

    config = small_config("PG")
    config.update(env="CartPole-v1", num_workers=0, lr=tune.grid_search([1e-3, 1e-2]))
    tuner = tune.Tuner(
        tune.with_resources(as_trainable("PG"), {"cpu": 0.5}),
        param_space=config,
        run_config=tune.RunConfig(stop={"training_iteration": 2}, storage_path=str(tmp_path),
                                  name="pg_grid", verbose=0),
    )
    results = tuner.fit()
    assert len(results) == 2
    assert not results.errors
    lrs = sorted(r.config["lr"] for r in results)
    assert lrs == [1e-3, 1e-2]
    for r in results:
        assert r.metrics["training_iteration"] == 2
        assert r.metrics["timesteps_total"] > 0
        assert "episode_reward_mean" in r.metrics
