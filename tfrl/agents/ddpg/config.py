"""DDPG's and TD3's DEFAULT_CONFIGs: COMMON_CONFIG plus deterministic actor-critic keys.

TD3 is DDPG with twin critics (`twin_q`), target policy smoothing (`smooth_target_policy`) and
delayed policy updates (`policy_delay`). Kept apart from the trainer (ddpg.py, td3.py) and the
policy (ddpg_policy.py) so all of them import it without importing each other.
"""
import copy

from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # === Model ===
    # Dense layers of the actor (obs -> tanh-squashed action) and of each critic
    # (obs, action -> Q).
    "actor_hiddens": [400, 300],
    "actor_hidden_activation": "relu",
    "critic_hiddens": [400, 300],
    "critic_hidden_activation": "relu",
    # === TD3 ===
    # Two critics; targets and the actor's loss use the smaller estimate (clipped double Q).
    "twin_q": False,
    # Update the actor and the target networks once every this many critic updates.
    "policy_delay": 1,
    # Target policy smoothing: the target action gets clipped Gaussian noise. Noise scales are
    # fractions of the action range's half-width (actions normalised to [-1, 1]).
    "smooth_target_policy": False,
    "target_noise": 0.2,
    "target_noise_clip": 0.5,
    # Rewards summed before bootstrapping (n-step returns).
    "n_step": 1,
    # === Exploration ===
    # type: "GaussianNoise" (N(0, stddev) per step) or "OrnsteinUhlenbeckNoise" (temporally
    # correlated: x += -ou_theta * x + ou_sigma * N(0, 1), scaled by ou_base_scale). The noise is
    # multiplied by a scale that falls linearly from initial_scale to final_scale over
    # scale_timesteps, added to the normalised action and clipped to the bounds. For the first
    # random_timesteps global steps, actions are uniform in the bounds instead. explore: False
    # gives the deterministic actor's action.
    "exploration_config": {
        "type": "OrnsteinUhlenbeckNoise",
        "random_timesteps": 1000,
        "stddev": 0.1,
        "ou_theta": 0.15,
        "ou_sigma": 0.2,
        "ou_base_scale": 0.1,
        "initial_scale": 1.0,
        "final_scale": 1.0,
        "scale_timesteps": 10000,
    },
    # === Target networks ===
    # target <- tau * online + (1 - tau) * target after every actor update.
    "tau": 0.002,
    # === Replay ===
    # Transitions the replay table holds (oldest evicted first).
    "buffer_size": 50000,
    # Prioritized replay (see DQN): sampling ~ priority**alpha, importance weights annealed
    # from prioritized_replay_beta to final_prioritized_replay_beta; priorities = |td| + eps.
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
    "actor_lr": 1e-3,
    "critic_lr": 1e-3,
    # Clip each network's gradients to this global norm (None: no clipping).
    "grad_clip": None,
    # Loss of the critics' TD errors: squared ("mse") or Huber ("huber").
    "critic_loss": "mse",
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
    # Sampling rounds between weight broadcasts to the remote workers.
    "broadcast_interval": 1,
})

TD3_CONFIG = copy.deepcopy(DEFAULT_CONFIG)
TD3_CONFIG.update({
    "twin_q": True,
    "policy_delay": 2,
    "smooth_target_policy": True,
    "target_noise": 0.2,
    "target_noise_clip": 0.5,
    "tau": 0.005,
    "exploration_config": dict(DEFAULT_CONFIG["exploration_config"], type="GaussianNoise",
                               stddev=0.1, random_timesteps=1000),
})
