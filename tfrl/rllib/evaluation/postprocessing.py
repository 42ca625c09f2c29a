"""Classic `ray.rllib.evaluation.postprocessing`."""
from tfrl.policy.postprocessing import (Postprocessing, adjust_nstep, compute_advantages,
                                        compute_gae_for_sample_batch, discount_cumsum)

discount = discount_cumsum  # the 0.8 name

__all__ = ["Postprocessing", "compute_advantages", "compute_gae_for_sample_batch",
           "adjust_nstep", "discount_cumsum", "discount"]
