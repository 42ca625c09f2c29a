"""ES's DEFAULT_CONFIG: COMMON_CONFIG plus the evolution strategies' own keys.

Kept apart from the trainer (es.py) so the workers and aggregators import it without the
trainer. ARS (tfrl/agents/ars) starts from this config.
"""
from tfrl.config import with_common_config

DEFAULT_CONFIG = with_common_config({
    # Standard deviation of the parameter perturbations (params +- noise_stdev * epsilon).
    "noise_stdev": 0.02,
    # Floats in the shared noise table (put once in the Ray object store, read by every worker
    # and aggregator without copying); a perturbation is a slice of it at a random offset.
    "noise_size": 10_000_000,
    # An iteration lasts at least this many perturbed episodes and env steps.
    "episodes_per_batch": 100,
    "train_batch_size": 10_000,
    # Antithetic pairs (two episodes each) a worker evaluates per round; one round asks every
    # worker once, and rounds repeat until the iteration's minimums are met.
    "perturbations_per_round": 5,
    # After each round a worker plays an unperturbed episode with this probability; those
    # episodes give episode_reward_mean.
    "eval_prob": 0.1,
    # Cap on episode length (None: the env's own limit).
    "episode_horizon": None,
    # Gaussian noise added to Box actions in perturbed episodes (0: none).
    "action_noise_std": 0.0,
    # Adam's step size, and the L2 penalty on the parameters.
    "stepsize": 0.01,
    "l2_coeff": 0.005,
    # Aggregation tree: 0 sends every worker's results to the driver (flat); N > 0 groups the
    # workers under N leaf aggregators, joined by aggregators of `aggregation_fan_in` children
    # under one root, so the driver receives one update vector per iteration.
    "num_aggregators": 0,
    "aggregation_fan_in": 4,
    # Iterations over which episode_reward_mean is averaged.
    "report_length": 10,
    "observation_filter": "MeanStdFilter",
    # Ray worker actors; 0 plays every episode in the driver (flat, num_aggregators ignored).
    "num_workers": 2,
    "model": {"fcnet_hiddens": [32, 32], "fcnet_activation": "tanh"},
})
