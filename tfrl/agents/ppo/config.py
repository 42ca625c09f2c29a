"""PPO's DEFAULT_CONFIG: COMMON_CONFIG plus proximal policy optimisation's own keys.

Kept apart from the trainer (ppo.py) and the policy (ppo_policy.py) so both import it without
importing each other.
"""
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # Critic and GAE: advantages are GAE(lambda) estimates bootstrapped from the value head.
    "use_critic": True,
    "use_gae": True,
    "lambda": 1.0,
    # Initial KL penalty coefficient and the KL it adapts towards (0 disables the penalty).
    "kl_coeff": 0.2,
    "kl_target": 0.01,
    # Env steps per fragment written by each env of a worker.
    "rollout_fragment_length": 200,
    # Env steps per optimizer step; a multiple of num_workers * num_envs_per_worker *
    # rollout_fragment_length (validate_config shortens fragments that are too long).
    "train_batch_size": 4000,
    # Minibatch size and number of epochs over each train batch.
    "sgd_minibatch_size": 128,
    "num_sgd_iter": 30,
    # Shuffle rows (sequences for recurrent models) between epochs.
    "shuffle_sequences": True,
    # Standardize the advantages of each minibatch (mean 0, std 1) inside the loss.
    "standardize_advantages": True,
    "lr": 5e-5,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
    # Weight of the (clipped) value loss.
    "vf_loss_coeff": 1.0,
    # Entropy bonus weight, and its optional [[timestep, coeff], ...] schedule.
    "entropy_coeff": 0.0,
    "entropy_coeff_schedule": None,
    # Surrogate clip range: the probability ratio is clipped to [1 - c, 1 + c].
    "clip_param": 0.3,
    # [[timestep, clip], ...] piecewise-linear schedule of the clip range (None: constant
    # `clip_param`); Stable-Baselines3's `clip_range=lin_0.2` is [[0, 0.2], [n_timesteps, 0]].
    "clip_param_schedule": None,
    # Value predictions move at most this far from the behaviour policy's predictions. It is
    # in reward units: scale it with the returns of the env. None: no value clipping.
    "vf_clip_param": 10.0,
    # Clip gradients to this global norm (None: no clipping).
    "grad_clip": None,
    # True: SyncSamplesOptimizer (single device); False: LocalMultiDeviceOptimizer.
    "simple_optimizer": False,
})
