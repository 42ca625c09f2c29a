"""A3C's DEFAULT_CONFIG and A2C's A2C_DEFAULT_CONFIG: COMMON_CONFIG plus the advantage
actor-critic's own keys (A2C: A3C's, with a synchronous train batch instead of grads_per_step).

Kept apart from the trainers (a3c.py, a2c.py) and the policy (a3c_policy.py) so they import it
without importing each other.
"""
from tfrl.config import merge_config, with_common_config

DEFAULT_CONFIG = with_common_config({
    # Critic and GAE: advantages are GAE(lambda) estimates bootstrapped from the value head.
    "use_critic": True,
    "use_gae": True,
    "lambda": 1.0,
    # Clip gradients to this global norm before applying them (None: no clipping).
    "grad_clip": 40.0,
    "lr": 0.0001,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
    # Weight of the value loss 0.5 * (V - target)^2 in the total loss.
    "vf_loss_coeff": 0.5,
    # Entropy bonus weight, and its optional [[timestep, coeff], ...] schedule.
    "entropy_coeff": 0.01,
    "entropy_coeff_schedule": None,
    # Short fragments: each is one gradient computed by a worker.
    "rollout_fragment_length": 10,
    # Gradients applied per optimizer step (one step = one call of optimizer.step()).
    "grads_per_step": 100,
    # The allreduce strategy's minibatch SGD on each worker's batch: None = the whole batch as
    # one minibatch, one pass.
    "sgd_minibatch_size": None,
    "num_sgd_iter": 1,
    "shuffle_sequences": True,
    # An iteration lasts at least this long, so results are not reported too often.
    "min_iter_time_s": 5,
})

A2C_DEFAULT_CONFIG = merge_config(DEFAULT_CONFIG, {
    "rollout_fragment_length": 20,
    # Env steps per learn step; a multiple of num_workers * num_envs_per_worker *
    # rollout_fragment_length (validate_config shortens fragments that are too long).
    "train_batch_size": 200,
    "min_iter_time_s": 10,
}, allow_new_keys=True)
A2C_DEFAULT_CONFIG.pop("grads_per_step")  # an A3C (async optimizer) setting
