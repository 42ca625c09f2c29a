"""IMPALA's DEFAULT_CONFIG and APPO's APPO_DEFAULT_CONFIG: COMMON_CONFIG plus the keys of
asynchronous sampling with V-trace (APPO: IMPALA's, plus PPO's clipped surrogate).

Kept apart from the trainers (impala.py, appo.py) and the policies (impala_policy.py,
appo_policy.py) so they import it without importing each other.
"""
from tfrl.config import merge_config
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # V-trace clip thresholds: rho_bar (value targets), c_bar (the trace) and the clip of the
    # importance weight of the policy-gradient advantage (None: no clipping).
    "vtrace_clip_rho_threshold": 1.0,
    "vtrace_clip_c_threshold": 1.0,
    "vtrace_clip_pg_rho_threshold": 1.0,
    # Steps of one env per trajectory fragment: one replay item, the unit V-trace runs over.
    "rollout_fragment_length": 50,
    # Env steps per learner step: train_batch_size / rollout_fragment_length whole fragments.
    "train_batch_size": 500,
    # Gradient steps on each train batch; with minibatch_buffer_size > 1 the learner cycles
    # through that many batches, taking one step on each in turn, until each had num_sgd_iter.
    "num_sgd_iter": 1,
    "minibatch_buffer_size": 1,
    # Fragments the learner queue (a replay Queue table) holds before writers wait.
    "learner_queue_size": 256,
    # sample() calls each remote worker has outstanding; a worker gets the newest weights
    # whenever one returns.
    "max_sample_requests_in_flight_per_worker": 2,
    # Learner steps between two refreshes of the weights sent to returning workers.
    "broadcast_interval": 1,
    "lr": 0.0005,
    # [[timestep, lr], ...] piecewise-linear learning rate (None: constant `lr`).
    "lr_schedule": None,
    # Weight of the value loss 0.5 * (V - v_s)^2 in the total loss.
    "vf_loss_coeff": 0.5,
    # Entropy bonus weight, and its optional [[timestep, coeff], ...] schedule.
    "entropy_coeff": 0.01,
    "entropy_coeff_schedule": None,
    # Clip gradients to this global norm (None: no clipping).
    "grad_clip": 40.0,
    # The learner's optimizer (RLlib's keys): "adam" (Adam(lr), TensorFlow's epsilon of 1e-7) or
    # "rmsprop" (the IMPALA paper's: RMSProp(lr, rho=decay, momentum, epsilon)).
    "opt_type": "adam",
    "decay": 0.99,
    "momentum": 0.0,
    "epsilon": 0.1,
    # An iteration lasts at least this long, so results are not reported too often.
    "min_iter_time_s": 10,
})

APPO_DEFAULT_CONFIG = merge_config(DEFAULT_CONFIG, {
    # Surrogate clip range: the ratio pi / mu of the V-trace advantage is clipped to
    # [1 - c, 1 + c].
    "clip_param": 0.4,
    "num_sgd_iter": 1,
    "vf_loss_coeff": 0.5,
    "entropy_coeff": 0.01,
}, allow_new_keys=True)
