"""Connecting rollout workers to replay tables, and sampling rounds that write into them.

The data path of every replay-fed optimizer: each policy that learns defines its own item
signature (`replay_signature`: one squeezed step per item, or one padded sequence per item for
recurrent policies; TF-Agents style spec-driven), the optimizer declares one table per such
policy on the trainer's replay service (`replay_table_name`: the base name for the default
policy, `<base>_<policy_id>` for the others), and every worker gets a `ReplayOutputSpec` mapping
policy ids to tables, so `sample()` on a worker writes postprocessed experience straight into
the tables and returns only counts and episode metrics to the driver.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tfrl.policy.sample_batch import DEFAULT_POLICY_ID

# policy id -> (table name, signature)
PolicyTables = Dict[str, Tuple[str, dict]]


def replay_table_name(base: str, policy_id: str) -> str:
    """The table of `policy_id`'s experience: `base` for the default policy, else
    `<base>_<policy_id>` (one table per learning policy)."""
    return base if policy_id == DEFAULT_POLICY_ID else f"{base}_{policy_id}"


def declare_replay_tables(workers, worker_settings, replay, make_table: Callable, base: str,
                          policy_ids: Sequence[str],
                          columns: Optional[Dict[str, Sequence[str]]] = None
                          ) -> Tuple[str, PolicyTables]:
    """Declares one table `make_table(name, signature, policy_id)` per policy id on `replay`,
    each signature derived from the local worker's policy (and the observation filter of
    `worker_settings`, a WorkerSettings), with the policy's `columns` where given (else its
    default replay columns), and starts the service. Returns
    (address, {policy_id: (table name, signature)})."""
    from tfrl.rollout import replay_signature

    local = workers.local_worker()
    columns = columns or {}
    tables = {}
    for pid in policy_ids:
        signature = replay_signature(local.get_policy(pid), columns.get(pid),
                                     observation_filter=worker_settings.observation_filter)
        table = make_table(replay_table_name(base, pid), signature, pid)
        replay.add_table(table)
        tables[pid] = (table.name, signature)
    return replay.start(), tables


def numeric_columns(batch) -> List[str]:
    """The columns of `batch` that replay can hold (`canonical_dtype` takes every leaf); a
    policy's free-form extras, such as strings, stay on the worker."""
    import numpy as np
    import tree

    from tfrl import errors
    from tfrl.rollout.replay_output import canonical_dtype

    def storable(value) -> bool:
        try:
            for leaf in tree.flatten(value):
                canonical_dtype(np.asarray(leaf).dtype)
        except errors.UnsupportedSpaceError:
            return False
        return True

    return [name for name, value in batch.items() if storable(value)]


def point_workers_at_replay(workers, worker_settings, address: str, tables: PolicyTables,
                            max_unacked_after_write: int = 0,
                            client_kwargs: Optional[dict] = None) -> None:
    """Gives every worker a `ReplayOutputSpec` for `tables` (see it for
    `max_unacked_after_write`), so their `sample()` writes each policy's experience into its
    table, in chunks of `worker_settings.rollout_fragment_length` rows; `client_kwargs` are the
    server's credentials (`ReplayService.client_kwargs`)."""
    from tfrl.rollout import ReplayOutputSpec

    client_kwargs = client_kwargs or {}
    workers.set_replay_output(ReplayOutputSpec(
        address, {pid: name for pid, (name, _) in tables.items()},
        columns={pid: list(signature) for pid, (_, signature) in tables.items()},
        chunk_length=worker_settings.rollout_fragment_length,
        max_unacked_after_write=max_unacked_after_write, token=client_kwargs.get("token"),
        root_certificates=client_kwargs.get("root_certificates")))


def declare_replay_table(workers, worker_settings, replay, make_table: Callable,
                         policy_id: str = DEFAULT_POLICY_ID) -> Tuple[str, str, dict]:
    """One policy's table `make_table(signature)` (see `declare_replay_tables`). Returns
    (address, table name, signature)."""
    address, tables = declare_replay_tables(
        workers, worker_settings, replay, lambda _name, signature, _pid: make_table(signature), "",
        [policy_id])
    name, signature = tables[policy_id]
    return address, name, signature


def summarize_round(summaries: List[dict]) -> Tuple[int, List, Dict[str, int]]:
    """(env steps, finished episodes' metrics, {policy_id: items written}) of the workers'
    `sample()` summaries of one round."""
    steps = sum(s["env_steps"] for s in summaries)
    episodes = [e for s in summaries for e in s["episodes"]]
    items = Counter()
    for s in summaries:
        items.update(s.get("items_written") or {})
    return steps, episodes, dict(items)


def sample_round(workers) -> Tuple[int, List, Dict[str, int]]:
    """One `sample()` on every remote worker (or on the local worker when there are none); each
    writes into replay. Returns (env steps written, finished episodes' metrics,
    {policy_id: items written})."""
    if workers.remote_workers():
        summaries = workers.call_remote_workers("sample")
    else:
        summaries = [workers.local_worker().sample()]
    return summarize_round(summaries)
