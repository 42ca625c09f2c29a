"""SAC's DEFAULT_CONFIG: COMMON_CONFIG plus soft actor-critic's own keys.

Kept apart from the trainer (sac.py) and the policy (sac_policy.py) so both import it without
importing each other. Names follow RLlib's classic SAC (`optimization`, `initial_alpha`,
`target_entropy`).
"""
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # === Model ===
    # Dense layers of the actor (obs -> mean and log-std of the pre-squash Gaussian) and of
    # each critic (obs, action -> Q).
    "actor_hiddens": [256, 256],
    "actor_hidden_activation": "relu",
    "critic_hiddens": [256, 256],
    "critic_hidden_activation": "relu",
    # Two critics; targets and the actor's loss use the smaller estimate.
    "twin_q": True,
    # Rewards summed before bootstrapping (n-step returns).
    "n_step": 1,
    # === Entropy ===
    # The temperature alpha starts here and is tuned so that the policy's entropy tracks
    # target_entropy ("auto": -dim(actions), the usual choice for tanh-squashed Gaussians).
    "initial_alpha": 1.0,
    "target_entropy": "auto",
    # === Exploration ===
    # Actions are sampled from the squashed Gaussian (explore: False takes its mode); for the
    # first random_timesteps global steps they are uniform in the bounds instead.
    "exploration_config": {"random_timesteps": 100},
    # === Target networks ===
    # target <- tau * online + (1 - tau) * target after every `policy_delay`-th update (the
    # target critics only; SAC's next actions come from the online actor).
    "tau": 0.005,
    "policy_delay": 1,
    # === Replay ===
    "buffer_size": 100000,
    # Prioritized replay (see DQN); priorities = mean |td error| of the critics + eps.
    "prioritized_replay": False,
    "prioritized_replay_alpha": 0.6,
    "prioritized_replay_beta": 0.4,
    "final_prioritized_replay_beta": 0.4,
    "prioritized_replay_beta_annealing_timesteps": 20000,
    "prioritized_replay_eps": 1e-6,
    # Sampled env steps in the table before learning starts.
    "learning_starts": 1500,
    # Trained / sampled steps ratio (None: one train batch per sampling round).
    "training_intensity": None,
    # === Optimisation ===
    "optimization": {
        "actor_learning_rate": 3e-4,
        "critic_learning_rate": 3e-4,
        "entropy_learning_rate": 3e-4,
    },
    # Clip each network's gradients to this global norm (None: no clipping).
    "grad_clip": None,
    "train_batch_size": 256,
    # === Rollouts ===
    # Act through XLA also in the driver (COMMON_CONFIG's "auto" does it in remote workers
    # only): the actor's one-row call there costs a fraction of the plain graph's wall clock,
    # most of all on a loaded machine (docs/benchmarks.md, issue 60).
    "jit_compile_actions": True,
    "num_workers": 0,
    "rollout_fragment_length": 1,
    "batch_mode": "truncate_episodes",
    "timesteps_per_iteration": 1000,
    "broadcast_interval": 1,
})
