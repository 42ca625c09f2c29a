"""Connecting rollout workers to a replay table, and sampling rounds that write into it.

The data path of every replay-fed optimizer: the local worker's policy defines the item
signature (`replay_signature`: one squeezed step per item, TF-Agents style spec-driven), the
optimizer declares a table with it on the trainer's replay service, and every worker gets a
`ReplayOutputSpec`, so `sample()` on a worker writes postprocessed steps straight into the table
and returns only counts and episode metrics to the driver.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from tfrl.policy.sample_batch import DEFAULT_POLICY_ID


def declare_replay_table(workers, config: dict, replay, make_table: Callable,
                         policy_id: str = DEFAULT_POLICY_ID) -> Tuple[str, str, dict]:
    """Declares the table `make_table(signature)` on `replay`, the signature derived from the
    local worker's policy, and starts the service. Returns (address, table name, signature)."""
    from tfrl.evaluation import replay_signature

    policy = workers.local_worker().get_policy(policy_id)
    signature = replay_signature(policy, observation_filter=config.get("observation_filter", "NoFilter"))
    table = make_table(signature)
    replay.add_table(table)
    return replay.start(), table.name, signature


def point_workers_at_replay(workers, config: dict, address: str, table: str, signature: dict,
                            max_unacked_after_write: int = 0,
                            client_kwargs: Optional[dict] = None) -> None:
    """Gives every worker a `ReplayOutputSpec` for `table` (see it for
    `max_unacked_after_write`), so their `sample()` writes into it; `client_kwargs` are the
    server's credentials (`ReplayService.client_kwargs`)."""
    from tfrl.evaluation import ReplayOutputSpec

    client_kwargs = client_kwargs or {}
    workers.set_replay_output(ReplayOutputSpec(
        address, table, columns=list(signature),
        chunk_length=config.get("rollout_fragment_length"),
        max_unacked_after_write=max_unacked_after_write, token=client_kwargs.get("token"),
        root_certificates=client_kwargs.get("root_certificates")))


def connect_workers_to_replay(workers, config: dict, replay, make_table: Callable,
                              policy_id: str = DEFAULT_POLICY_ID,
                              max_unacked_after_write: int = 0) -> Tuple[str, str, dict]:
    """`declare_replay_table`, then `point_workers_at_replay`. Returns (address, table name,
    signature)."""
    address, table, signature = declare_replay_table(workers, config, replay, make_table, policy_id)
    point_workers_at_replay(workers, config, address, table, signature, max_unacked_after_write,
                            replay.client_kwargs)
    return address, table, signature


def sample_round(workers) -> Tuple[int, List]:
    """One `sample()` on every remote worker (or on the local worker when there are none); each
    writes into replay. Returns (env steps written, finished episodes' metrics)."""
    if workers.remote_workers():
        summaries = workers.call_remote_workers("sample")
    else:
        summaries = [workers.local_worker().sample()]
    steps = sum(s["env_steps"] for s in summaries)
    episodes = [e for s in summaries for e in s["episodes"]]
    return steps, episodes
