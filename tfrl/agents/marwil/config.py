"""MARWIL's DEFAULT_CONFIG (BC is the same with beta 0): COMMON_CONFIG plus its own keys.

Kept apart from the trainer (marwil.py) and the policy (marwil_policy.py) so both import it
without importing each other.
"""
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # Advantage weighting: the policy imitates action a with weight exp(beta * A / norm); 0 is
    # plain behaviour cloning.
    "beta": 1.0,
    # Weight of the value loss (trained only when beta > 0).
    "vf_coeff": 1.0,
    # The running mean of squared advantages that normalises A starts here and moves by this
    # fraction of the difference at every learn step.
    "moving_average_sqd_adv_norm_start": 100.0,
    "moving_average_sqd_adv_norm_update_rate": 1e-8,
    # Learning from recorded experience: point `input` at the files (a directory, glob or list).
    "input": "sampler",
    # Recorded batches carry the recording algorithm's columns; MARWIL recomputes its returns.
    "postprocess_inputs": True,
    # Evaluation episodes come from the envs, greedy.
    "evaluation_config": {"input": "sampler", "explore": False},
    # Recorded batches are read in the driver by default.
    "num_workers": 0,
    "train_batch_size": 2000,
    # Minibatch and epochs per train batch (None: the whole train batch, one pass).
    "sgd_minibatch_size": None,
    "num_sgd_iter": 1,
    "shuffle_sequences": True,
    "lr": 1e-4,
    "lr_schedule": None,
    "grad_clip": None,
})
