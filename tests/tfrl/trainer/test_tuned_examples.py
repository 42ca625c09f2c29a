"""The shipped tuned examples reach their stop reward (the mean return of the last 100 episodes;
10 for the Pendulum examples) within their env-step budget, through the full path: Ray rollout
workers, the embedded replay server, ReplayDataset and the learner."""
import pytest

from tfrl.registry import get_trainer_class
from tfrl.cli import load_experiment_file


def train_to_stop_reward(name):
    experiment = load_experiment_file(name)
    target = experiment["stop"]["episode_reward_mean"]
    budget = experiment["stop"]["timesteps_total"]
    trainer = get_trainer_class(experiment["run"])(config=experiment["config"], env=experiment["env"])
    try:
        best = float("-inf")
        while True:
            result = trainer.train()
            best = max(best, result["episode_reward_mean"])
            if result["episode_reward_mean"] >= target or result["timesteps_total"] >= budget:
                return target, best, result["timesteps_total"]
    finally:
        trainer.stop()


@pytest.mark.learning
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", ["cartpole-ppo", "cartpole-dqn", "cartpole-pg", "cartpole-a2c",
                                  "cartpole-impala", "cartpole-appo", "pendulum-sac", "pendulum-td3",
                                  "cartpole-apex"])
def test_tuned_example_reaches_its_stop_reward(ray_session, name):
    target, best, steps = train_to_stop_reward(name)
    assert best >= target, f"{name}: best mean return {best:.1f} < {target} after {steps} env steps"
