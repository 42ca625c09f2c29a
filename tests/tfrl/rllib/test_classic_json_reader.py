"""Classic `offline.JsonReader`: recorded batches read back one by one, and as tensors a model's
custom loss reads inside the traced learn step (custom_loss.py's imitation loss), a new batch
each time the step runs."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.errors import NoInputFilesError
from tfrl.rllib.agents.pg.pg_tf_policy import PGTFPolicy
from tfrl.rllib.models import ModelCatalog
from tfrl.rllib.models.tf.fcnet import FullyConnectedNetwork
from tfrl.rllib.models.tf.tf_action_dist import Categorical
from tfrl.rllib.models.tf.tf_modelv2 import TFModelV2
from tfrl.rllib.offline import JsonReader, JsonWriter
from tfrl.rllib.policy.sample_batch import SampleBatch
from tfrl.rllib.utils.framework import try_import_tf

tf1, tf, tfv = try_import_tf()


def _record(directory, batches):
    writer = JsonWriter(str(directory))
    for batch in batches:
        writer.write(SampleBatch(batch))
    writer.close()


def _demonstrations(rows, seed):
    """CartPole-shaped rows whose action is 1 exactly when the first feature is positive."""
    obs = np.random.default_rng(seed).uniform(-1, 1, (rows, 4)).astype(np.float32)
    return {"obs": obs, "actions": (obs[:, 0] > 0).astype(np.int64),
            "rewards": np.ones(rows, np.float32), "dones": np.zeros(rows, bool)}


def test_input_ops_give_the_next_recorded_batch_each_time_the_graph_runs(tmp_path):
    batches = [_demonstrations(rows, seed) for rows, seed in ((3, 0), (5, 1))]
    _record(tmp_path, batches)
    reader = JsonReader(str(tmp_path))
    assert reader.next().count == 3

    ops = JsonReader(str(tmp_path)).tf_input_ops()  # eagerly: the first batch's values
    assert {"obs", "actions", "rewards"} <= set(ops)
    np.testing.assert_array_equal(ops["obs"].numpy(), batches[0]["obs"])

    def read():
        ops = JsonReader(str(tmp_path)).tf_input_ops()
        assert ops["obs"].shape.as_list() == [None, 4]  # traced: any number of rows
        return ops["actions"]

    read = tf.function(read)
    seen = [read().numpy() for _ in range(4)]
    expected = [b["actions"] for b in batches]
    # one file, cycled: both batches in every pass of two, each exactly as recorded
    for first, second in (seen[:2], seen[2:]):
        assert sorted(map(tuple, (first, second))) == sorted(map(tuple, expected))


def test_a_directory_without_recordings_is_refused(tmp_path):
    with pytest.raises(NoInputFilesError, match="names no experience files"):
        JsonReader(str(tmp_path))


class ImitationModel(TFModelV2):
    """custom_loss.py's model: the policy loss plus an imitation loss on recorded actions."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, input_files):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.input_files = input_files
        self.fcnet = FullyConnectedNetwork(obs_space, action_space, num_outputs, model_config,
                                           name="fcnet")
        self.register_variables(self.fcnet.variables())

    def forward(self, input_dict, state, seq_lens):
        return self.fcnet(input_dict, state, seq_lens)

    def custom_loss(self, policy_loss, loss_inputs):
        input_ops = JsonReader(self.input_files).tf_input_ops()
        logits, _ = self.forward({"obs": tf.cast(input_ops["obs"], tf.float32)}, [], None)
        self.imitation_loss = tf.reduce_mean(
            -Categorical(logits, self.model_config).logp(input_ops["actions"]))
        return policy_loss + 10 * self.imitation_loss

    def metrics(self):
        return {"imitation_loss": self.imitation_loss}


ModelCatalog.register_custom_model("classic_imitation_model", ImitationModel)


def test_a_custom_loss_on_recorded_actions_teaches_the_policy_to_imitate(tmp_path):
    _record(tmp_path, [_demonstrations(64, seed) for seed in range(4)])
    policy = PGTFPolicy(
        gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2),
        {"lr": 0.01, "model": {"custom_model": "classic_imitation_model", "fcnet_hiddens": [16],
                               "custom_model_config": {"input_files": str(tmp_path)}}})
    held_out = _demonstrations(200, seed=99)

    def agreement():
        actions, _, _ = policy.compute_actions(held_out["obs"], explore=False)
        return float(np.mean(actions == held_out["actions"]))

    # the policy's own batch carries no signal (zero rewards): only the imitation term teaches
    own = {"obs": held_out["obs"][:32], "actions": np.zeros(32, np.int64),
           "rewards": np.zeros(32, np.float32), "advantages": np.zeros(32, np.float32)}
    before = agreement()
    losses = [policy.learn_on_batch(own)["model/imitation_loss"] for _ in range(60)]
    assert np.mean(losses[-10:]) < 0.6 * np.mean(losses[:10])
    assert agreement() > max(before, 0.85)
