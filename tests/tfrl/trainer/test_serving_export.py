"""Versioned SavedModel export: with `export_every`, a trainer writes its policy as
`<export_dir>/<iteration>/` (TF Serving's layout), each version complete when it appears and
serving the policy of its iteration."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tfrl.registry import get_trainer_class
from tfrl.errors import InvalidConfigError


@pytest.mark.timeout(240)
def test_every_nth_iteration_becomes_a_numbered_version(ray_session, tmp_path):
    base = str(tmp_path / "serving")
    trainer = get_trainer_class("PG")(config={
        "env": "CartPole-v1", "num_workers": 0, "model": {"fcnet_hiddens": [8]},
        "rollout_fragment_length": 50, "train_batch_size": 50, "lr": 0.05, "seed": 0,
        "export_every": 2, "export_dir": base})
    obs = np.random.default_rng(0).uniform(-0.2, 0.2, (16, 4)).astype(np.float32)
    try:
        results = [trainer.train() for _ in range(4)]
        logits_now = trainer.get_policy().compute_actions(obs, explore=False)[2][
            "action_dist_inputs"]
    finally:
        trainer.stop()
    assert sorted(os.listdir(base)) == ["2", "4"]  # no partial directories left behind
    assert [r.get("export_path") for r in results] == [
        None, os.path.join(base, "2"), None, os.path.join(base, "4")]
    newest = tf.saved_model.load(os.path.join(base, "4")).signatures["serving_default"]
    served = newest(observations=tf.constant(obs))["action_dist_inputs"].numpy()
    np.testing.assert_allclose(served, logits_now, rtol=1e-5, atol=1e-6)
    older = tf.saved_model.load(os.path.join(base, "2")).signatures["serving_default"]
    assert not np.allclose(older(observations=tf.constant(obs))["action_dist_inputs"], served)


def test_export_every_without_a_place_is_refused(ray_session):
    with pytest.raises(InvalidConfigError, match="export_every needs a place"):
        get_trainer_class("PG")(config={"env": "CartPole-v1", "num_workers": 0,
                                        "export_every": 1})


def test_evaluation_plays_the_env_even_when_training_reads_files(ray_session, tmp_path):
    """Evaluation workers that read files would never finish an episode."""
    (tmp_path / "x.json").write_text("")
    config = {"env": "CartPole-v1", "num_workers": 0, "input": str(tmp_path),
              "evaluation_interval": 1}
    evaluation = get_trainer_class("BC")._default_config  # noqa: SLF001 - the class's defaults
    assert evaluation["evaluation_config"]["input"] == "sampler"
    with pytest.raises(InvalidConfigError, match="input must be 'sampler'"):
        get_trainer_class("PG")(config=dict(config, evaluation_config={"input": str(tmp_path)}))
