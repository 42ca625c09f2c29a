"""Classic `ray.rllib.examples.env`: helper envs of classic RLlib's examples (multi_agent,
parametric_actions_cartpole)."""
