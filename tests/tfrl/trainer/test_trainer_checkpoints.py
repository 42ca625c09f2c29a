"""save()/restore() resume training where it stopped; export_policy_model serves the policy."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tfrl.agents.ppo.ppo import PPOTrainer


@pytest.mark.timeout(300)
def test_restore_brings_back_weights_optimizer_state_and_counters(ray_session, small_config, tmp_path):
    config = small_config("PPO")
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        trainer.train()
        trainer.train()
        path = trainer.save(str(tmp_path))
        saved_weights = trainer.get_policy().get_weights()
        saved_state = trainer.get_policy().get_state()
        saved_steps = trainer.optimizer.num_steps_sampled
    finally:
        trainer.stop()

    restored = PPOTrainer(config=config, env="CartPole-v1")
    try:
        restored.restore(path)
        assert restored.iteration == 2
        assert restored.optimizer.num_steps_sampled == saved_steps
        for a, b in zip(saved_weights, restored.get_policy().get_weights()):
            np.testing.assert_array_equal(a, b)
        optimizer_state = restored.get_policy().get_state()
        for key in ("optimizer_variables", "optimizer"):
            if key in saved_state:
                for a, b in zip(saved_state[key], optimizer_state[key]):
                    np.testing.assert_array_equal(a, b)
        # the remote workers act with the restored weights
        remote_weights = restored.workers.foreach_worker(lambda w: w.get_weights())[1]
        for a, b in zip(saved_weights, remote_weights["default_policy"]):
            np.testing.assert_array_equal(a, b)
        result = restored.train()
        assert result["training_iteration"] == 3
        assert result["timesteps_total"] > saved_steps
    finally:
        restored.stop()


@pytest.mark.timeout(300)
def test_exported_model_serves_the_trained_policy_without_tfrl(ray_session, small_config, tmp_path):
    trainer = PPOTrainer(config=small_config("PPO"), env="CartPole-v1")
    try:
        trainer.train()
        export_dir = trainer.export_policy_model(str(tmp_path / "model"))
        obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
        expected = np.array([trainer.compute_action(o) for o in obs])
    finally:
        trainer.stop()
    np.save(tmp_path / "obs.npy", obs)
    script = textwrap.dedent(f"""
        import sys
        class NoProjectImports:  # the exported model must load without this project's code
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("tfrl", "replay"):
                    raise ImportError(name + " is not available to the serving process")
        sys.meta_path.insert(0, NoProjectImports())
        try:
            import tfrl
            sys.exit("tfrl must not be importable here")
        except ImportError:
            pass
        import numpy as np, tensorflow as tf
        model = tf.saved_model.load({export_dir!r})
        out = model.signatures["serving_default"](observations=tf.constant(np.load({str(tmp_path / 'obs.npy')!r})))
        key = "deterministic_actions" if "deterministic_actions" in out else "actions"
        print(" ".join(str(int(a)) for a in out[key].numpy()))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    served = np.array([int(a) for a in done.stdout.split()])
    np.testing.assert_array_equal(served, expected)
