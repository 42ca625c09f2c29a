"""Trainers run unchanged as Ray Tune trainables: grid searches, with and without workers."""
import pytest

from tfrl.agents.ppo.ppo import PPOTrainer
from tfrl.tune import as_trainable, trainer_resources


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


def test_a_trial_reserves_its_trainer_and_every_rollout_worker():
    request = as_trainable("PPO").default_resource_request(
        {"env": "CartPole-v1", "num_workers": 2, "num_gpus": 1, "num_gpus_per_worker": 0.5})
    assert request.bundles == [{"GPU": 1.0}, {"CPU": 1.0, "GPU": 0.5}, {"CPU": 1.0, "GPU": 0.5}]
    assert request.required_resources == {"CPU": 2.0, "GPU": 2.0}
    # the algorithm's defaults fill what the trial's config leaves out (PPO: 2 workers; the
    # trainer itself, as outside Tune, reserves no CPU unless num_cpus_for_driver says so)
    assert trainer_resources(PPOTrainer, {"env": "CartPole-v1"}).required_resources == {"CPU": 2.0}
    assert trainer_resources(PPOTrainer, {"num_cpus_for_driver": 1}).bundles == [{"CPU": 1.0}] * 3
    # workers that ask for nothing get no bundle
    assert trainer_resources(PPOTrainer, {"num_workers": 3, "num_cpus_per_worker": 0,
                                          "num_cpus_for_driver": 1}).bundles == [{"CPU": 1.0}]
    # a trial that would reserve nothing reserves 1 CPU for its trainer (Tune needs a request)
    assert trainer_resources(PPOTrainer, {"num_workers": 3, "num_cpus_per_worker": 0}).bundles == [
        {"CPU": 1.0}]
    # classic scripts' resources_per_trial=...to_json() (custom_train_fn.py): the same
    # bundles as a plain factory, which Ray 2.x takes (a dict would be one bundle)
    from ray.tune.execution.placement_groups import PlacementGroupFactory
    request = trainer_resources(PPOTrainer, {"num_workers": 2, "num_gpus": 1,
                                             "custom_resources_per_worker": {"rollout": 1}})
    plain = request.to_json()
    assert type(plain) is PlacementGroupFactory
    assert plain.bundles == request.bundles == [{"GPU": 1.0}] + [{"CPU": 1.0, "rollout": 1.0}] * 2
    assert plain.strategy == "PACK"
    # evaluation workers start inside the trial too, with evaluation_config's resources
    evaluated = trainer_resources(PPOTrainer, {"num_workers": 0, "evaluation_interval": 1,
                                               "evaluation_num_workers": 2,
                                               "evaluation_config": {"num_cpus_per_worker": 0.5}})
    assert evaluated.required_resources == {"CPU": 1.0} and len(evaluated.bundles) >= 2
    # no evaluation_interval: no evaluation workers, none reserved
    assert trainer_resources(PPOTrainer, {"num_workers": 1,
                                          "evaluation_num_workers": 2}).required_resources == {"CPU": 1.0}


@pytest.mark.timeout(400)
def test_readme_tune_example_with_rollout_workers(ray_session, tmp_path):
    """The README's example (with a small network and two iterations instead of a reward
    target): two trials of PPO with two rollout workers each, on six logical CPUs."""
    from ray import tune

    from tfrl.tune import as_trainable

    results = tune.Tuner(as_trainable("PPO"), param_space={"env": "CartPole-v1", "num_workers": 2,
                         "lr": tune.grid_search([1e-3, 3e-4]),
                         "train_batch_size": 128, "sgd_minibatch_size": 64, "num_sgd_iter": 2,
                         "rollout_fragment_length": 32, "model": {"fcnet_hiddens": [16]}},
                         run_config=tune.RunConfig(stop={"training_iteration": 2}, verbose=0,
                                                   storage_path=str(tmp_path))).fit()
    assert not results.errors
    assert sorted(r.config["lr"] for r in results) == [3e-4, 1e-3]
    for r in results:
        assert r.metrics["training_iteration"] == 2
        assert r.metrics["timesteps_total"] >= 256


@pytest.mark.timeout(300)
def test_algorithm_names_are_tune_trainables(ray_session, small_config, tmp_path):
    from ray import tune

    import tfrl.tune  # noqa: F401 - registers the names

    config = dict(small_config("PG"), env="CartPole-v1", num_workers=1)
    results = tune.Tuner("PG", param_space=config,
                         run_config=tune.RunConfig(stop={"training_iteration": 1}, verbose=0,
                                                   storage_path=str(tmp_path))).fit()
    assert not results.errors
    assert results[0].metrics["training_iteration"] == 1
    assert results[0].metrics["timesteps_total"] > 0
