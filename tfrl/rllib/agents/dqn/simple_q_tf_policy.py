"""Classic `ray.rllib.agents.dqn.simple_q_tf_policy` (Ray 0.8.1 to 1.x):
the pieces of a plain Q-learning policy, as tfrl's DQN defines them."""
from tfrl.agents.dqn.dqn_policy import (EpsilonGreedyExploration, build_q_losses,
                                        build_q_models, q_loss_stats)
from tfrl.agents.dqn.dqn_policy import sample_epsilon_greedy as build_action_sampler
from tfrl.policy.mixins import TargetNetworkMixin

ExplorationStateMixin = EpsilonGreedyExploration  # the 0.8 name of the epsilon-greedy state


def setup_early_mixins(policy, obs_space, action_space, config):
    """Classic SimpleQ's before_init hook. tfrl's mixins set themselves up from the config
    when the policy is built (tfrl.policy.mixins), so there is nothing left to do here."""


def setup_late_mixins(policy, obs_space, action_space, config):
    """Classic SimpleQ's after_init hook; see setup_early_mixins."""


__all__ = ["build_q_models", "build_action_sampler", "build_q_losses", "q_loss_stats",
           "setup_early_mixins", "setup_late_mixins", "ExplorationStateMixin",
           "TargetNetworkMixin"]
