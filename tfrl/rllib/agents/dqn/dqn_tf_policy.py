"""Classic `ray.rllib.agents.dqn.dqn_tf_policy` (Ray 0.8.1 to 1.x): DQN's TF policy and its parts."""
from tfrl.agents.dqn.dqn_model import QNetwork
from tfrl.agents.dqn.dqn_policy import (DQNTFPolicy, EpsilonGreedyExploration, build_q_losses,
                                        build_q_models, compute_q_targets, huber_loss,
                                        postprocess_nstep_and_prio, q_loss_stats,
                                        sample_epsilon_greedy)
from tfrl.policy.mixins import ComputeTDErrorMixin, LearningRateSchedule, TargetNetworkMixin

ExplorationStateMixin = EpsilonGreedyExploration  # the 0.8 name of the epsilon-greedy state

__all__ = ["DQNTFPolicy", "QNetwork", "build_q_losses", "build_q_models", "compute_q_targets",
           "huber_loss", "postprocess_nstep_and_prio", "q_loss_stats", "sample_epsilon_greedy",
           "EpsilonGreedyExploration", "ExplorationStateMixin", "ComputeTDErrorMixin",
           "LearningRateSchedule", "TargetNetworkMixin"]
