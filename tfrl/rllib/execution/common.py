"""Classic `ray.rllib.execution.common`: counter, timer and info keys and the plan's shared
metrics (`tfrl.execution.metrics_context`)."""
from tfrl.execution.metrics_context import (APPLY_GRADS_TIMER, COMPUTE_GRADS_TIMER,
                                            GRAD_WAIT_TIMER, LAST_TARGET_UPDATE_TS,
                                            LEARN_ON_BATCH_TIMER, LEARNER_INFO, LOAD_BATCH_TIMER,
                                            NUM_TARGET_UPDATES, SAMPLE_TIMER,
                                            STEPS_SAMPLED_COUNTER, STEPS_TRAINED_COUNTER,
                                            WORKER_UPDATE_TIMER)
from tfrl.execution.metrics_context import get_shared_metrics as _get_shared_metrics
from tfrl.execution.metrics_context import global_vars as _get_global_vars
from tfrl.execution.rollout_ops import check_sample_batch as _check_sample_batch_type

__all__ = ["STEPS_SAMPLED_COUNTER", "STEPS_TRAINED_COUNTER", "LAST_TARGET_UPDATE_TS",
           "NUM_TARGET_UPDATES", "APPLY_GRADS_TIMER", "COMPUTE_GRADS_TIMER", "WORKER_UPDATE_TIMER",
           "GRAD_WAIT_TIMER", "SAMPLE_TIMER", "LEARN_ON_BATCH_TIMER", "LOAD_BATCH_TIMER",
           "LEARNER_INFO", "_get_shared_metrics", "_get_global_vars", "_check_sample_batch_type"]
