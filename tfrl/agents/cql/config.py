"""CQL's DEFAULT_CONFIG: SAC's plus the conservative penalty's keys (RLlib classic's names).

Kept apart from the trainer (cql.py) and the policy (cql_policy.py) so both import it without
importing each other.
"""
import copy

from tfrl.agents.sac.config import DEFAULT_CONFIG as SAC_CONFIG

DEFAULT_CONFIG = copy.deepcopy(SAC_CONFIG)
DEFAULT_CONFIG.update({
    # === Conservative penalty ===
    # Weight of the penalty: temperature * logsumexp(Q(s, a) / temperature) over sampled actions
    # minus Q(s, a_data), added to each critic's loss.
    "min_q_weight": 5.0,
    "temperature": 1.0,
    # Actions sampled per state for the logsumexp, from each of: uniform in the bounds, the policy
    # at s, the policy at s'.
    "num_actions": 10,
    # Learner steps whose actor loss is behaviour cloning (alpha * log pi(a~|s) - log pi(a_data|s))
    # before the SAC actor loss takes over.
    "bc_iters": 0,
    # === Data ===
    # CQL learns from recorded experience: set `input: DIR` (files recorded with `output: DIR`);
    # the recorded transitions go through replay as SAC's sampled ones do.
    "learning_starts": 256,
})
