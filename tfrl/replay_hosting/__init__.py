"""Replay hosting, part of the execution layer: the replay servers a trainer reads and writes.

- placement.py: where a trainer's servers run (in the driver, or as Ray actors on nodes offering
  `replay_resources`), which interface they listen on, and the credentials clients present
- service.py: `ReplayService`, the trainer's one server (embedded or an external `replay-server`)
  and the tables the policy optimizers declare on it
- shards.py: `ReplayShards`, N servers holding one logical buffer (Ape-X's replay actors)
- datasets.py: the typed dataset of a declared table, for both
"""
from tfrl.replay_hosting.placement import LOOPBACK, ReplayHosting, ReplayServerActor
from tfrl.replay_hosting.service import ReplayService
from tfrl.replay_hosting.shards import ReplayShards

__all__ = ["LOOPBACK", "ReplayHosting", "ReplayServerActor", "ReplayService", "ReplayShards"]
