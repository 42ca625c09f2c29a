"""Trajectory postprocessing: advantages (GAE or discounted returns) and n-step returns.

Called from a policy's `postprocess_trajectory` on the rollout-worker side, before batches go to
the replay service or the learner. Gymnasium semantics: an episode that *terminated* has no
future value (bootstrap 0); an episode that was *truncated* (time limit) or a fragment that was
*cut* mid-episode by the rollout worker bootstraps from the value of its last next-observation.
"""
from __future__ import annotations

import numpy as np
import tree

from tfrl.errors import InvalidBatchError, InvalidConfigError
from tfrl.policy.sample_batch import SampleBatch, concat_samples

# the policy config keys compute_gae_for_sample_batch reads (an algorithm's DEFAULT_CONFIG holds
# them); "lambda" only with use_gae
ADVANTAGE_KEYS = ("gamma", "use_gae", "use_critic")


class Postprocessing:
    """Column names added by postprocessing."""

    ADVANTAGES = SampleBatch.ADVANTAGES
    VALUE_TARGETS = SampleBatch.VALUE_TARGETS


def discount_cumsum(x: np.ndarray, gamma: float) -> np.ndarray:
    """y[t] = sum_k gamma^k x[t+k] along axis 0."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    running = 0.0
    for t in range(len(x) - 1, -1, -1):
        running = x[t] + gamma * running
        out[t] = running
    return out


def compute_advantages(rollout: SampleBatch, last_r: float, gamma: float = 0.9,
                       lambda_: float = 1.0, use_gae: bool = True,
                       use_critic: bool = True) -> SampleBatch:
    """Add `advantages` and `value_targets` to one trajectory piece (in place; returns it).

    `rollout` must hold a single episode piece: no episode boundary inside it except possibly
    at its last row. `last_r` is the value estimate of the state after the last row (0 if the
    episode terminated there).

    With `use_gae`: delta_t = r_t + gamma V(s_t+1) - V(s_t), A = discounted sum of deltas with
    gamma*lambda, value_targets = A + V. Without: returns G_t = sum gamma^k r_t+k + bootstrap;
    advantages = G - V if `use_critic`, else G (and value_targets = G, or zeros without critic).

    Raises:
        InvalidBatchError: if `rewards` is missing, or `vf_preds` is missing while a critic is
            used.
    """
    if SampleBatch.REWARDS not in rollout:
        raise InvalidBatchError("compute_advantages needs a 'rewards' column.")
    rewards = np.asarray(rollout[SampleBatch.REWARDS], dtype=np.float64)
    if (use_gae or use_critic) and SampleBatch.VF_PREDS not in rollout:
        raise InvalidBatchError(
            "compute_advantages with use_gae or use_critic needs a 'vf_preds' column; emit it "
            "from the policy's extra action outputs or pass use_gae=False, use_critic=False.")
    if use_gae:
        vpred = np.asarray(rollout[SampleBatch.VF_PREDS], dtype=np.float64)
        vpred_next = np.concatenate([vpred[1:], [last_r]])
        deltas = rewards + gamma * vpred_next - vpred
        advantages = discount_cumsum(deltas, gamma * lambda_)
        value_targets = advantages + vpred
    else:
        returns = discount_cumsum(np.concatenate([rewards, [last_r]]), gamma)[:-1]
        if use_critic:
            advantages = returns - np.asarray(rollout[SampleBatch.VF_PREDS], dtype=np.float64)
            value_targets = returns
        else:
            advantages = returns
            value_targets = np.zeros_like(returns)
    rollout[Postprocessing.ADVANTAGES] = advantages.astype(np.float32)
    rollout[Postprocessing.VALUE_TARGETS] = value_targets.astype(np.float32)
    return rollout


def _needs_bootstrap(piece: SampleBatch) -> bool:
    if SampleBatch.TERMINATEDS in piece and bool(piece[SampleBatch.TERMINATEDS][-1]):
        return False
    return True  # truncated, or cut mid-episode by the rollout worker


def compute_gae_for_sample_batch(policy, sample_batch: SampleBatch, other_agent_batches=None,
                                 episode=None) -> SampleBatch:
    """The standard postprocess_fn of actor-critic policies (PPO, A2C, PG with a baseline).

    Splits the batch into episode pieces, bootstraps each piece that did not terminate from the
    policy's value of its last `new_obs` (one batched value call for all pieces), and adds
    advantages/value targets using `policy.config` keys gamma, use_gae, use_critic and (with
    use_gae) lambda.

    Raises:
        InvalidConfigError: the policy's config lacks one of those keys.
        InvalidBatchError: if columns needed by compute_advantages are missing, or a piece
            needs a bootstrap value and the batch has no `new_obs`.
    """
    config = policy.config
    missing = [key for key in ADVANTAGE_KEYS if key not in config]
    if config.get("use_gae") and "lambda" not in config:
        missing.append("lambda")
    if missing:
        raise InvalidConfigError(
            f"compute_gae_for_sample_batch reads config keys {missing}, which "
            f"{type(policy).__name__}'s config lacks; declare them in its get_default_config "
            "(A3C's and PPO's DEFAULT_CONFIG hold them)")
    use_critic, use_gae = config["use_critic"], config["use_gae"]
    pieces = sample_batch.split_by_episode() if (
        SampleBatch.EPS_ID in sample_batch or SampleBatch.TERMINATEDS in sample_batch
    ) else [sample_batch]
    last_values = [0.0] * len(pieces)
    need = [i for i, p in enumerate(pieces) if _needs_bootstrap(p)]
    if need and use_critic:
        if SampleBatch.NEXT_OBS not in sample_batch:
            raise InvalidBatchError(
                "Bootstrapping a truncated or cut trajectory needs the 'new_obs' column.")
        def last_rows(column):  # the column's last row of each piece that needs a bootstrap
            return tree.map_structure(
                lambda *leaves: np.concatenate(leaves, axis=0),
                *[tree.map_structure(lambda a, n=pieces[i].count: a[n - 1:n], pieces[i][column])
                  for i in need])

        states = []
        j = 0
        while SampleBatch.state_out(j) in sample_batch:
            states.append(last_rows(SampleBatch.state_out(j)))
            j += 1
        prev = {}
        if getattr(policy, "reads_prev_action_reward", False):
            # the step after the last row: its previous action and reward are that row's
            prev = dict(prev_action_batch=last_rows(SampleBatch.ACTIONS),
                        prev_reward_batch=last_rows(SampleBatch.REWARDS))
        values = policy.compute_values(last_rows(SampleBatch.NEXT_OBS), states or None, **prev)
        for i, v in zip(need, values):
            last_values[i] = float(v)
    # compute_advantages only adds columns, so a shallow copy keeps the input batch as it was;
    # concat_samples below copies the arrays
    gae = {"lambda_": config["lambda"]} if use_gae else {}  # lambda weighs GAE only
    done = [compute_advantages(p.copy(shallow=True), last_values[i], config["gamma"],
                               use_gae=use_gae, use_critic=use_critic, **gae)
            for i, p in enumerate(pieces)]
    return concat_samples(done)


def adjust_nstep(n_step: int, gamma: float, batch: SampleBatch) -> SampleBatch:
    """Rewrite a batch in place into n-step transitions; returns it.

    Row i becomes (s_i, a_i, R_i, s_{i+k}) with R_i = sum_{j<k} gamma^j r_{i+j}, where k <= n
    stops early at the end of an episode (a terminated/truncated row or an `eps_id` change) or
    at the end of the batch. `new_obs`, `terminateds` and `truncateds` are taken from row i+k-1,
    and a column `n_steps` holds k, so the bootstrap term is gamma**k * (1 - terminated) *
    Q(new_obs).

    Raises:
        InvalidBatchError: if n_step < 1 or a needed column is missing.
    """
    if n_step < 1:
        raise InvalidBatchError(f"n_step must be >= 1, got {n_step}.")
    for col in (SampleBatch.REWARDS, SampleBatch.NEXT_OBS, SampleBatch.TERMINATEDS):
        if col not in batch:
            raise InvalidBatchError(f"adjust_nstep needs the {col!r} column.")
    count = batch.count
    rewards = np.asarray(batch[SampleBatch.REWARDS], dtype=np.float64)
    terminated = np.asarray(batch[SampleBatch.TERMINATEDS], dtype=bool)
    truncated = (np.asarray(batch[SampleBatch.TRUNCATEDS], dtype=bool)
                 if SampleBatch.TRUNCATEDS in batch else np.zeros(count, bool))
    eps = np.asarray(batch[SampleBatch.EPS_ID]) if SampleBatch.EPS_ID in batch else None
    idx = np.arange(count)
    last = idx.copy()  # index of the last row included for each start row
    new_rewards = rewards.copy()
    open_ = ~(terminated | truncated)  # may the sum extend beyond `last`?
    for k in range(1, n_step):
        nxt = last + 1
        can = open_ & (nxt < count)
        if eps is not None:
            can &= eps[np.minimum(nxt, count - 1)] == eps[idx]
        last = np.where(can, nxt, last)
        new_rewards = np.where(can, new_rewards + gamma ** k * rewards[np.minimum(nxt, count - 1)],
                               new_rewards)
        open_ = can & ~(terminated[last] | truncated[last])
    batch[SampleBatch.REWARDS] = new_rewards.astype(np.float32)
    batch[SampleBatch.NEXT_OBS] = tree.map_structure(lambda a: a[last],
                                                     batch[SampleBatch.NEXT_OBS])
    batch[SampleBatch.TERMINATEDS] = terminated[last]
    if SampleBatch.TRUNCATEDS in batch:
        batch[SampleBatch.TRUNCATEDS] = truncated[last]
    batch[SampleBatch.N_STEPS] = (last - idx + 1).astype(np.int32)
    return batch


def postprocess_nstep_and_prio(policy, sample_batch, other_agent_batches=None, episode=None):
    """n-step transitions (adjust_nstep with config n_step and gamma; adds `n_steps`) and a
    `weights` column of ones where the batch has none (replay puts importance weights there).

    Raises:
        InvalidBatchError: if rewards, new_obs or terminateds are missing.
    """
    batch = adjust_nstep(int(policy.config["n_step"]), float(policy.config["gamma"]),
                         sample_batch.copy(shallow=True))
    if SampleBatch.PRIO_WEIGHTS not in batch:
        batch[SampleBatch.PRIO_WEIGHTS] = np.ones(batch.count, np.float32)
    return batch
