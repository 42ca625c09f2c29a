"""ARS's DEFAULT_CONFIG: ES's config (tfrl/agents/es/config.py) with augmented random search's
settings (Mania et al., 2018: a linear policy on standardised observations, V2-t)."""
from tfrl.agents.es.config import DEFAULT_CONFIG as ES_DEFAULT_CONFIG
from tfrl.config import merge_config

DEFAULT_CONFIG = merge_config(ES_DEFAULT_CONFIG, {
    "noise_stdev": 0.03,
    # SGD step size alpha of theta += alpha / b * sum over the top b of (r+ - r-) / sigma_R * delta
    "stepsize": 0.02,
    "l2_coeff": 0.0,
    "model": {"fcnet_hiddens": []},
    # Top directions b used in the update (None: all pairs of the iteration).
    "rollouts_used": None,
}, allow_new_keys=True)
