"""Fixtures for the policy tests."""
import pytest

from .policy_helpers import ActorCriticPolicy, cartpole_spaces


@pytest.fixture
def ac_policy():
    obs_space, act_space = cartpole_spaces()
    return ActorCriticPolicy(obs_space, act_space, {"seed": 1})
