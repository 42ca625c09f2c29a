"""Classic `ray.rllib.tests`: the helper environments classic example modules import from RLlib's
tests."""
