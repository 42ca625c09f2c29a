"""DDPG, TD3 and SAC end to end on Pendulum-v1: train() through SyncReplayOptimizer (the embedded
replay server, ReplayDataset, the MirroredStrategy learner over two logical CPU devices), then
the exported SavedModel serves actions within the action bounds; and the README's SAC example."""
import numpy as np
import pytest
import tensorflow as tf

from tfrl.registry import get_trainer_class

TINY = dict(actor_hiddens=[16], critic_hiddens=[16], learning_starts=64, train_batch_size=32,
            buffer_size=2000, timesteps_per_iteration=100, seed=3,
            # the policy itself must keep actions in bounds: nothing clips them on the way
            clip_actions=False)
BOUND = 2.0  # Pendulum-v1's torque bounds are [-2, 2]


def serve_exported(trainer, tmp_path):
    export_dir = trainer.export_policy_model(str(tmp_path / "exported"))
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    # far outside the observations seen in training, to push the actor towards saturation
    obs = np.random.default_rng(0).normal(scale=50.0, size=(256, 3)).astype(np.float32)
    return serve(observations=tf.constant(obs))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name,extra", [
    ("DDPG", {"num_workers": 1, "rollout_fragment_length": 8}),  # Ray rollout worker, OU noise
    ("TD3", {"prioritized_replay": True}),
    ("SAC", {}),
])
def test_trainer_learns_through_the_replay_path_and_exports_in_bound_actions(
        ray_session, tmp_path, name, extra):
    trainer = get_trainer_class(name)(config=dict(TINY, **extra), env="Pendulum-v1")
    try:
        policy = trainer.get_policy()
        assert policy is trainer.optimizer.policy  # the learner's copy, built under the strategy
        assert trainer.optimizer.strategy.num_replicas_in_sync == 2
        before = [w.copy() for w in policy.get_weights()]
        for _ in range(2):
            result = trainer.train()
        trainer.optimizer.drain()
        stats = result["info"]["learner"]["default_policy"]
        assert trainer.optimizer.num_train_steps > 0
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        after = policy.get_weights()
        assert any(not np.allclose(b, a) for b, a in zip(before, after)), "nothing learned"
        critic_updates = int(policy.critic_optimizer.iterations.numpy())
        assert critic_updates == trainer.optimizer.num_train_steps
        if name == "TD3":  # delayed policy updates under the two-replica learner
            assert int(policy.actor_optimizer.iterations.numpy()) == critic_updates // 2
        else:
            assert int(policy.actor_optimizer.iterations.numpy()) == critic_updates
        if name == "SAC":
            assert stats["alpha_value"] != 1.0  # the temperature is being tuned
        action = trainer.compute_action(np.array([1.0, 0.0, 0.0], np.float32), explore=False)
        assert action.shape == (1,) and -BOUND <= action[0] <= BOUND
        served = serve_exported(trainer, tmp_path)
    finally:
        trainer.stop()
    for key in ("actions", "deterministic_actions"):
        values = served[key].numpy()
        assert values.shape == (256, 1)
        assert np.all(values >= -BOUND) and np.all(values <= BOUND), key


@pytest.mark.timeout(300)
def test_readme_sac_example(ray_session, tmp_path):
    # README, "Train": continuous control (the settings shrunk so the test stays short)
    from tfrl.agents.sac import SACTrainer

    trainer = SACTrainer(env="Pendulum-v1", config={
        "actor_hiddens": [16], "critic_hiddens": [16],  # README: [256, 256]
        "learning_starts": 100, "timesteps_per_iteration": 150})  # README: 1000, 1000
    try:
        result = trainer.train()
        action = trainer.compute_action([1.0, 0.0, 0.0])
        export_dir = trainer.export_policy_model(str(tmp_path / "sac_pendulum"))
    finally:
        trainer.stop()
    assert result["timesteps_total"] >= 150
    learner = result["info"]["learner"]["default_policy"]
    assert np.isfinite(learner["alpha_value"]) and np.isfinite(learner["entropy"])
    assert -BOUND <= action[0] <= BOUND
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    served = serve(observations=tf.constant([[1.0, 0.0, 0.0]]))["actions"].numpy()
    assert np.all(np.abs(served) <= BOUND)


@pytest.mark.parametrize("name", ["pendulum-sac", "pendulum-td3", "pendulum-ddpg",
                                  "halfcheetah-sac"])
def test_shipped_continuous_examples_hold_valid_configs(name):
    from importlib import import_module

    from tfrl.registry import ALGORITHMS
    from tfrl.cli import load_experiment_file
    from tfrl.config import merge_config

    experiment = load_experiment_file(name)
    trainer_cls = get_trainer_class(experiment["run"])
    config = merge_config(trainer_cls.default_config(), experiment["config"])
    validate = import_module(ALGORITHMS[experiment["run"]][0])
    validate.validate_config(config)
    assert experiment["stop"]["timesteps_total"] <= (200_000 if "halfcheetah" in name else 20_000)
