"""The server's description of its tables (a ServerInfo message, or an insert stream's first
response) as `replay.TableInfo`s: what `Client.server_info` returns and writers check their
items against.
"""
from __future__ import annotations

import json
from typing import Dict

from replay import protocol
from replay.proto import replay_pb2
from replay.rate_limiters import RateLimiterInfo
from replay.table_info import TableInfo


def tables_from_server_info(response: replay_pb2.ServerInfoResponse) -> Dict[str, TableInfo]:
    """Table name -> `replay.TableInfo` of a ServerInfo response."""
    return {proto.name: table_info_from_proto(proto) for proto in response.tables}


def table_info_from_proto(proto: replay_pb2.TableInfo) -> TableInfo:
    """A `replay.TableInfo` from its ServerInfo message."""
    config = json.loads(proto.config_json) if proto.config_json else {}
    rate_limiter_info = RateLimiterInfo(json.loads(proto.rate_limiter_info_json or "{}"))
    num_unique_samples = rate_limiter_info.pop("table_num_unique_samples", 0)
    num_updates = rate_limiter_info.pop("table_num_updates", 0)
    num_episodes = rate_limiter_info.pop("table_num_episodes", 0)
    num_deleted_episodes = rate_limiter_info.pop("table_num_deleted_episodes", 0)
    return TableInfo(
        name=proto.name, current_size=proto.size, max_size=proto.max_size,
        max_times_sampled=proto.max_times_sampled,
        sampler_options=config.get("sampler", config.get("sampler_options", {})),
        remover_options=config.get("remover", config.get("remover_options", {})),
        rate_limiter_info=rate_limiter_info, num_unique_samples=num_unique_samples,
        num_updates=num_updates, num_episodes=num_episodes, num_deleted_episodes=num_deleted_episodes,
        signature=protocol.signature_from_json(config.get("signature")),
        num_inserts=proto.num_inserts, num_samples=proto.num_samples, num_deletes=proto.num_deletes,
        num_evictions=proto.num_evictions,
        extensions=json.loads(proto.extensions_info_json or "[]"))
