"""DQN's DEFAULT_CONFIG: COMMON_CONFIG plus deep Q-learning's own keys.

Kept apart from the trainer (dqn.py) and the policy (dqn_policy.py) so both import it without
importing each other.
"""
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # === Model ===
    # Dueling head: Q = V(s) + A(s, a) - mean_a A(s, a).
    "dueling": True,
    # Dense ReLU layers of each head (after the model's fcnet_hiddens trunk).
    "hiddens": [256],
    # Distributional DQN (C51): > 1 predicts each action's return distribution over this many
    # evenly spaced values in [v_min, v_max] instead of its mean.
    "num_atoms": 1,
    "v_min": -10.0,
    "v_max": 10.0,
    # Noisy nets: the Q heads' layers carry learned weight noise (initial scale sigma0).
    "noisy": False,
    "sigma0": 0.5,
    # Double Q-learning: the online network picks the next action, the target network rates it.
    "double_q": True,
    # Rewards summed before bootstrapping (n-step returns).
    "n_step": 1,
    # === Exploration ===
    # Epsilon-greedy: epsilon falls linearly from initial to final over epsilon_timesteps
    # global env steps, then stays.
    "exploration_config": {
        "initial_epsilon": 1.0,
        "final_epsilon": 0.02,
        "epsilon_timesteps": 10000,
    },
    # === Target network ===
    # Copy the online weights into the target network every this many sampled env steps.
    "target_network_update_freq": 500,
    # 1.0: hard copy; < 1: target <- tau * online + (1 - tau) * target at each update.
    "tau": 1.0,
    # === Replay ===
    # Transitions the replay table holds (oldest evicted first).
    "buffer_size": 50000,
    # Prioritized replay (proportional): sampling probability ~ priority**alpha, importance
    # weights (N * P)**-beta normalised by their max, beta annealed linearly from
    # prioritized_replay_beta to final_prioritized_replay_beta over
    # prioritized_replay_beta_annealing_timesteps; new priorities = |td_error| + eps.
    "prioritized_replay": True,
    "prioritized_replay_alpha": 0.6,
    "prioritized_replay_beta": 0.4,
    "final_prioritized_replay_beta": 0.4,
    "prioritized_replay_beta_annealing_timesteps": 20000,
    "prioritized_replay_eps": 1e-6,
    # Workers give each transition the initial priority |td_error| + eps from their own copy
    # of the networks instead of 1.0 (on by default in Ape-X).
    "worker_side_prioritization": False,
    # Sampled env steps in the table before learning starts.
    "learning_starts": 1000,
    # Trained / sampled steps ratio the replay table holds (SampleToInsertRatio). None: one
    # train batch of train_batch_size per sampling round (num_workers * num_envs_per_worker *
    # rollout_fragment_length steps), i.e. train_batch_size / round size.
    "training_intensity": None,
    # === Optimisation ===
    # The loss of each TD error (RLlib's name): "huber" (quadratic within 1, linear beyond) or
    # "mse" (quadratic everywhere: a rare large error, such as a terminal step the network
    # still rates near the value of a long episode, pulls in proportion to its size).
    "td_error_loss_fn": "huber",
    # [low, high]: TD targets are clipped to this range, the returns the task can have (with
    # rewards in [r_min, r_max], [r_min, r_max] / (1 - gamma)). Values above what any policy can
    # be worth are overestimates, and clipping their targets keeps them from feeding
    # themselves. None: no clipping.
    "q_target_bounds": None,
    "lr": 5e-4,
    # Adam's epsilon (RLlib's key). Larger values damp the steps of weights whose gradients
    # are small and steady; Rainbow and Dopamine use 1.5e-4 (0.01 / batch of 64).
    "adam_epsilon": 1e-7,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
    # Clip gradients to this global norm (None: no clipping).
    "grad_clip": 40.0,
    "train_batch_size": 32,
    # === Rollouts ===
    # Samples in the trainer's own process (classic RLlib's and RLlib 2.x's DQN default, so a
    # script that also builds another trainer fits a small machine); the tuned cartpole-dqn
    # samples with one remote worker, which acts while the learner trains.
    "num_workers": 0,
    "rollout_fragment_length": 4,
    "batch_mode": "truncate_episodes",
    # Report results after at least this many sampled env steps.
    "timesteps_per_iteration": 1000,
    # Sampling rounds between weight broadcasts to the remote workers (1: before every round).
    # Broadcasts never wait: the next round is sampled while the learner trains.
    "broadcast_interval": 1,
})
