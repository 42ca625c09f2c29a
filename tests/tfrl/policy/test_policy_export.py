"""SavedModel export: loaded in a fresh Python that cannot import tfrl, it acts like the policy."""
import json
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

from .policy_helpers import ActorCriticPolicy, TINY_MODEL, cartpole_spaces

LOADER = textwrap.dedent("""
    import sys
    class _NoProjectImports:  # the exported model must load without this project's code
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tfrl", "replay"):
                raise ImportError(f"{name} is not available to the serving process")
    sys.meta_path.insert(0, _NoProjectImports())
    import json
    import numpy as np
    try:
        import tfrl  # noqa: F401
        print(json.dumps({"tfrl_importable": True}))
        sys.exit(0)
    except ImportError:
        pass
    import tensorflow as tf
    args = json.load(open(sys.argv[1]))
    loaded = tf.saved_model.load(args["dir"])
    fn = loaded.signatures["serving_default"]
    inputs = {k: tf.constant(np.asarray(v, dtype=args["dtypes"][k])) for k, v in
              args["inputs"].items()}
    out = fn(**inputs)
    print(json.dumps({"tfrl_importable": False,
                      "outputs": {k: v.numpy().tolist() for k, v in out.items()}}))
""")


def _run_isolated(tmp_path, export_dir, inputs):
    args = {"dir": str(export_dir), "inputs": {k: np.asarray(v).tolist() for k, v in
                                               inputs.items()},
            "dtypes": {k: str(np.asarray(v).dtype) for k, v in inputs.items()}}
    (tmp_path / "args.json").write_text(json.dumps(args))
    (tmp_path / "loader.py").write_text(LOADER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run([sys.executable, "-I", str(tmp_path / "loader.py"),
                             str(tmp_path / "args.json")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(180)
def test_exported_model_serves_without_tfrl(tmp_path):
    obs_space, act_space = cartpole_spaces()
    policy = ActorCriticPolicy(obs_space, act_space, {"seed": 3})
    export_dir = tmp_path / "saved"
    policy.export_model(str(export_dir))
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    result = _run_isolated(tmp_path, export_dir, {"observations": obs})
    assert result["tfrl_importable"] is False
    out = {k: np.asarray(v) for k, v in result["outputs"].items()}
    actions, _, extras = policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(out["deterministic_actions"], actions)
    np.testing.assert_allclose(out["deterministic_action_logp"], extras["action_logp"],
                               rtol=1e-5)
    np.testing.assert_allclose(out["vf_preds"], policy.compute_values(obs), rtol=1e-5)
    assert out["actions"].shape == (5,) and set(np.unique(out["actions"])) <= {0, 1}
    assert np.all(out["action_logp"] <= 0.0)


@pytest.mark.timeout(180)
def test_exported_recurrent_dict_policy_takes_state_and_leaf_inputs(tmp_path):
    obs_space = gym.spaces.Dict({"pos": gym.spaces.Box(-1, 1, (2,), np.float32),
                                 "mode": gym.spaces.Discrete(3)})
    act_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    policy = ActorCriticPolicy(obs_space, act_space, {
        "seed": 0, "model": dict(TINY_MODEL, use_lstm=True, lstm_cell_size=4)})
    export_dir = tmp_path / "saved_rnn"
    policy.export_model(str(export_dir))
    rng = np.random.default_rng(1)
    obs = {"pos": rng.uniform(-1, 1, (3, 2)).astype(np.float32),
           "mode": np.array([0, 2, 1], np.int64)}
    state = [rng.normal(size=(3, 4)).astype(np.float32) for _ in range(2)]
    result = _run_isolated(tmp_path, export_dir, {
        "observations_mode": obs["mode"], "observations_pos": obs["pos"],
        "state_in_0": state[0], "state_in_1": state[1]})
    out = {k: np.asarray(v) for k, v in result["outputs"].items()}
    actions, state_out, _ = policy.compute_actions(obs, state, explore=False)
    np.testing.assert_allclose(out["deterministic_actions"], actions, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["state_out_0"], state_out[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["state_out_1"], state_out[1], rtol=1e-5, atol=1e-6)
