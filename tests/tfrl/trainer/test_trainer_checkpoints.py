"""save()/restore() resume training where it stopped; export_policy_model serves the policy.

Checkpoints are JSON + npz: nothing in them is unpickled, and the pickle checkpoints of older
versions are refused unopened."""
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tfrl.agents.ppo.ppo import PPOTrainer
from tfrl.errors import CheckpointError, PickleCheckpointError
from tfrl.trainer import Trainer


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

    directory = os.path.dirname(path)
    assert sorted(os.listdir(directory)) == ["trainer_state.json", "trainer_state.npz"]
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["format"] == "tfrl-trainer-checkpoint"

    restored = PPOTrainer(config=config, env="CartPole-v1")
    try:
        restored.restore(directory)
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


class _RunsCodeWhenUnpickled:
    """A pickle payload that creates a marker file when loaded: proof that it was unpickled."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _crafted_pickle(path, marker):
    with open(path, "wb") as f:
        pickle.dump({"iteration": 1, "payload": _RunsCodeWhenUnpickled(marker)}, f)


@pytest.mark.timeout(300)
def test_pickle_checkpoints_are_refused_without_being_unpickled(ray_session, small_config, tmp_path,
                                                                monkeypatch):
    marker = tmp_path / "code_ran"
    legacy = tmp_path / "legacy" / "checkpoint_000001"
    legacy.mkdir(parents=True)
    _crafted_pickle(legacy / "trainer_state.pkl", marker)
    disguised = tmp_path / "disguised" / "checkpoint_000001"
    disguised.mkdir(parents=True)
    _crafted_pickle(disguised / "trainer_state.json", marker)
    _crafted_pickle(disguised / "trainer_state.npz", marker)

    trainer = PPOTrainer(config=small_config("PPO"), env="CartPole-v1")
    try:
        good = trainer.save(str(tmp_path / "good"))
        for path in (legacy, legacy / "trainer_state.pkl"):
            with pytest.raises(PickleCheckpointError, match="pickle checkpoint of an older"):
                trainer.restore(str(path))
        with pytest.raises(CheckpointError, match="cannot read"):
            trainer.restore(str(disguised))
        # a valid JSON file whose arrays file is a pickle
        os.replace(os.path.join(os.path.dirname(good), "trainer_state.npz"),
                   tmp_path / "kept.npz")
        _crafted_pickle(os.path.join(os.path.dirname(good), "trainer_state.npz"), marker)
        with pytest.raises(CheckpointError, match="cannot read the arrays"):
            trainer.restore(good)
        # the worker-level state of older versions (pickled bytes) is refused too
        with pytest.raises(PickleCheckpointError):
            trainer.workers.local_worker().restore(pickle.dumps({"state": {}, "filters": {}}))
        assert trainer.iteration == 0
        # reading a valid checkpoint never reaches pickle
        os.replace(tmp_path / "kept.npz", os.path.join(os.path.dirname(good), "trainer_state.npz"))

        def no_pickle(*args, **kwargs):
            raise AssertionError("a checkpoint was read with pickle")

        with monkeypatch.context() as patch:
            for name in ("load", "loads", "Unpickler"):
                patch.setattr(pickle, name, no_pickle)
            state = Trainer.load_checkpoint_state(good)
        trainer.set_state(state)
    finally:
        trainer.stop()
    assert not marker.exists(), "a crafted pickle ran code"


def test_cli_refuses_a_pickle_checkpoint_with_a_clear_message(tmp_path):
    marker = tmp_path / "code_ran"
    legacy = tmp_path / "checkpoint_000003"
    legacy.mkdir()
    _crafted_pickle(legacy / "trainer_state.pkl", marker)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-m", "tfrl.cli", "rollout", str(legacy)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "PickleCheckpointError" in done.stderr and "retrain" in done.stderr
    assert not marker.exists()
