"""Classic PPOLoss: a custom PPO variant whose loss function builds
`ppo_tf_policy.PPOLoss` (both argument orders) minimises the same loss as tfrl's PPO."""
import gymnasium as gym
import numpy as np
import pytest

from tfrl.rllib.agents.ppo.ppo_tf_policy import BEHAVIOUR_LOGITS, PPOLoss, PPOTFPolicy
from tfrl.rllib.evaluation.postprocessing import Postprocessing
from tfrl.rllib.policy.sample_batch import SampleBatch
from tfrl.rllib.utils.framework import try_import_tf

tf1, tf, tfv = try_import_tf()


def classic_ppo_loss(policy, model, dist_class, train_batch, action_space_first=False):
    """Ray 0.8's ppo_surrogate_loss, written with PPOLoss."""
    logits, state = model.from_batch(train_batch)
    action_dist = dist_class(logits, model)
    arguments = (
        dist_class, model, train_batch[Postprocessing.VALUE_TARGETS],
        train_batch[Postprocessing.ADVANTAGES], train_batch[SampleBatch.ACTIONS],
        train_batch[BEHAVIOUR_LOGITS], train_batch[SampleBatch.ACTION_LOGP],
        train_batch[SampleBatch.VF_PREDS], action_dist, model.value_function(),
        policy.kl_coeff, tf.ones_like(train_batch[Postprocessing.ADVANTAGES], dtype=tf.bool))
    if action_space_first:
        arguments = (policy.action_space,) + arguments
    policy.loss_obj = PPOLoss(
        *arguments, entropy_coeff=policy.config["entropy_coeff"],
        clip_param=policy.config["clip_param"], vf_clip_param=policy.config["vf_clip_param"],
        vf_loss_coeff=policy.config["vf_loss_coeff"], use_gae=policy.config["use_gae"])
    return policy.loss_obj.loss


ClassicPPO = PPOTFPolicy.with_updates(name="ClassicPPO", loss_fn=classic_ppo_loss)
ClassicPPO08 = PPOTFPolicy.with_updates(
    name="ClassicPPO08",
    loss_fn=lambda p, m, d, b: classic_ppo_loss(p, m, d, b, action_space_first=True))


@pytest.mark.parametrize("variant", [ClassicPPO, ClassicPPO08])
def test_a_variant_built_on_ppoloss_has_tfrl_ppos_loss(variant):
    config = {"standardize_advantages": False, "entropy_coeff": 0.01, "kl_coeff": 0.3,
              "vf_clip_param": 0.5, "model": {"fcnet_hiddens": [8]}}
    spaces = (gym.spaces.Box(-1.0, 1.0, (3,)), gym.spaces.Discrete(3))
    reference, classic = PPOTFPolicy(*spaces, config), variant(*spaces, config)
    classic.set_weights(reference.get_weights())
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (12, 3)).astype(np.float32)
    actions, _, extras = reference.compute_actions(obs)
    batch = {"obs": obs, "actions": actions, **extras,
             Postprocessing.ADVANTAGES: rng.normal(size=12).astype(np.float32),
             Postprocessing.VALUE_TARGETS: rng.normal(size=12).astype(np.float32)}
    # a step of the reference first, so that the old and new distributions differ
    reference.learn_on_batch(batch)
    classic.set_weights(reference.get_weights())
    losses = []
    for policy in (reference, classic):
        tensors = {k: tf.constant(v) for k, v in policy._prepare_batch(batch).items()}
        loss, stats, _ = policy.loss_and_stats(tensors)
        losses.append(float(loss))
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert isinstance(classic.loss_obj, PPOLoss)


def test_ppoloss_refuses_missing_arguments():
    with pytest.raises(TypeError, match="missing"):
        PPOLoss(None, None)
