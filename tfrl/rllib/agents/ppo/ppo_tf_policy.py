"""Classic `ray.rllib.agents.ppo.ppo_tf_policy` (Ray 0.8.1 to 1.x): PPO's TF policy and its parts."""
from tfrl.agents.ppo.ppo_loss import PPOLoss
from tfrl.agents.ppo.ppo_policy import (PPOTFPolicy, kl_and_loss_stats, ppo_surrogate_loss,
                                        standardized)
from tfrl.policy.mixins import (EntropyCoeffSchedule, KLCoeffMixin, LearningRateSchedule,
                                ValueNetworkMixin)
from tfrl.policy.postprocessing import compute_gae_for_sample_batch as postprocess_ppo_gae
from tfrl.policy.sample_batch import SampleBatch

# classic PPO recorded the behaviour policy's logits under this column; tfrl's name for it
BEHAVIOUR_LOGITS = SampleBatch.ACTION_DIST_INPUTS

__all__ = ["PPOTFPolicy", "PPOLoss", "ppo_surrogate_loss", "postprocess_ppo_gae", "kl_and_loss_stats",
           "standardized", "KLCoeffMixin", "ValueNetworkMixin", "LearningRateSchedule",
           "EntropyCoeffSchedule", "BEHAVIOUR_LOGITS"]

