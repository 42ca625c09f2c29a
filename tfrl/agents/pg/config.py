"""PG's DEFAULT_CONFIG: COMMON_CONFIG plus the vanilla policy gradient's own keys.

Kept apart from the trainer (pg.py) and the policy (pg_policy.py) so both import it without
importing each other.
"""
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # Env steps per fragment written by each env of a worker.
    "rollout_fragment_length": 200,
    # Env steps per learn step; a multiple of num_workers * num_envs_per_worker *
    # rollout_fragment_length (validate_config shortens fragments that are too long).
    "train_batch_size": 200,
    # Minibatch and epochs of the sync optimizer: None = the whole train batch, one pass.
    "sgd_minibatch_size": None,
    "num_sgd_iter": 1,
    "shuffle_sequences": True,
    "lr": 0.0004,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
})
