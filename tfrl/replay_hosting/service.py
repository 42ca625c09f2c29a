"""The trainer's replay service: an embedded replay server, or an external `replay-server`.

Policy optimizers declare the tables they need (`add_table`, each with the signature their
policy writes and reads), then `start()`. Without `replay_address` in the config, the trainer
embeds a `replay.Server` on a free loopback port, so rollout workers (Ray actors) write
experience straight into it and the learner streams it back through `ReplayDataset`: the bulk
data never passes through the driver's Python code. With `replay_address`, the tables must
already exist on that server (declared in its YAML config, as in examples/replay_tables.yaml).
Like a Reverb table, such a table may leave out its signature: the trainer's datasets take their
dtypes and shapes from the declared table (`dataset`); a signature the server's table does have
must match the trainer's.
`replay_token_file` and `replay_root_certificates` name the files holding an external server's
access token and the PEM certificate to trust for TLS; `client_kwargs` carries them to every
client the optimizers and rollout workers open (`Client`, `ReplayDataset`, `ReplayOutputSpec`).

On a Ray cluster the server the trainer starts can live elsewhere (placement.py):
with `replay_resources` it runs as a Ray actor on a node offering those resources, with
`replay_bind_address` it listens on its node's address (the default stays loopback), and the
same token and TLS keys then protect it. `address` is always what clients on any node dial.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Dict, List, Optional

from tfrl import errors
from tfrl.config.settings import Settings, setting
from tfrl.replay_hosting.datasets import declared_table_dataset
from tfrl.replay_hosting.placement import ReplayHosting, read_credentials

logger = logging.getLogger(__name__)


class ReplayService:
    def __init__(self, config: dict):
        self._config = config
        self._external_address: Optional[str] = config.get("replay_address")
        self._tables: Dict[str, object] = {}
        self._server = None
        self._actor = None  # the server's Ray actor, with replay_resources
        self._address: Optional[str] = None  # of the server the trainer started
        self._client = None
        self._client_kwargs: Dict[str, Any] = {}
        self._datasets: List[Any] = []  # the ReplayDatasets `dataset` opened, closed by `close_datasets`
        token_file = config.get("replay_token_file")
        certificates_file = config.get("replay_root_certificates")
        self.hosting = None
        if self.embedded:
            self.hosting = ReplayHosting.from_config(config)
            self._client_kwargs = self.hosting.client_kwargs
            if self.hosting.in_actors and config.get("replay_checkpoint"):
                raise errors.InvalidConfigError(
                    "replay_checkpoint saves the tables of a replay server in the driver; with "
                    "replay_resources the server is an actor on another node, whose tables the "
                    "trainer does not checkpoint; drop one of the two")
            return
        for key in ("replay_resources", "replay_bind_address", "replay_tls_certificate_file",
                    "replay_tls_private_key_file"):
            if config.get(key) is not None:
                raise errors.InvalidConfigError(
                    f"{key} places or secures a replay server the trainer starts; the server at "
                    f"replay_address={self._external_address} is started by you (replay-server "
                    "--host/--token-file/--tls-cert), so drop it or drop replay_address")
        if token_file:
            token = read_credentials(token_file, "replay_token_file").decode().strip()
            if not token:
                raise errors.InvalidConfigError(f"replay_token_file {token_file} is empty")
            self._client_kwargs["token"] = token
        if certificates_file:
            self._client_kwargs["root_certificates"] = read_credentials(certificates_file,
                                                                  "replay_root_certificates")

    @property
    def embedded(self) -> bool:
        return self._external_address is None

    def add_table(self, table) -> None:
        """Declares a table (a `replay.Table`) the optimizer needs.

        Raises:
          InvalidConfigError: the service already started with another table set.
        """
        if self._address is not None:
            raise errors.InvalidConfigError(
                f"replay table {table.name!r} declared after the embedded replay server started")
        self._tables[table.name] = table

    def start(self) -> str:
        """Starts the embedded server (or checks the external one) and returns its address.

        Raises:
          InvalidConfigError: the external server lacks a declared table, or has one that cannot
            serve the trainer (another signature; a non-queue or too small table where the
            trainer needs a queue); the message names the table and the YAML entry to use.
          UnavailableError (replay.errors): no replay server at `replay_address`.
        """
        if self.embedded:
            if self._address is None:
                tables = list(self._tables.values())
                if self.hosting.in_actors:
                    actors, addresses = self.hosting.start_actors(
                        1, [table.config() for table in tables])
                    self._actor, self._address = actors[0], addresses[0]
                    logger.info("replay server actor (resources %s) on %s",
                                self.hosting.resources, self._address)
                else:
                    self._server, self._address = self.hosting.start_embedded(tables)
                    logger.info("embedded replay server on %s", self._address)
        else:
            info = self.client().server_info()
            missing = [name for name in self._tables if name not in info]
            if missing:
                examples = [_yaml_entry(self._tables[name]) for name in missing]
                raise errors.InvalidConfigError(
                    f"the replay server at {self._external_address} has no table(s) {missing} "
                    f"(it has {sorted(info)}); add them to its --config YAML under `tables:` "
                    f"({'; '.join(examples)}), or drop replay_address to use an embedded server")
            for name, table in self._tables.items():
                self._check_external_table(table, info[name])
        return self.address

    def _check_external_table(self, table, info) -> None:
        problems: List[str] = []
        if info.signature is not None and table.signature is not None:
            problems += _signature_differences(table.signature, info.signature)
        declared = table.config()
        if declared["rate_limiter"]["kind"] == "Queue":
            # On-policy optimizers read every step exactly once, in order, one train batch at a
            # time: the workers write a whole batch (plus the round that crosses it) before the
            # learner reads, so a smaller queue blocks the workers for good.
            needed = on_policy_queue_size(self._config)
            if info.sampler_options.get("kind") != "Fifo" or info.max_times_sampled != 1:
                problems.append(
                    f"it must be a queue (sampler Fifo, max_times_sampled 1), found sampler "
                    f"{info.sampler_options.get('kind')} with max_times_sampled {info.max_times_sampled}")
            if info.max_size < needed:
                problems.append(
                    f"max_size {info.max_size} is below the {needed} steps of one train batch plus "
                    "one sampling round, which the trainer writes before it reads")
        if problems:
            raise errors.InvalidConfigError(
                f"table {table.name!r} on the replay server at {self._external_address} cannot "
                f"serve this trainer: {'; '.join(problems)}. Declare it in the server's --config "
                f"YAML as {_yaml_entry(table)}, or "
                "drop replay_address to use an embedded server")

    @property
    def address(self) -> str:
        if self.embedded:
            if self._address is None:
                raise errors.TfrlError("the embedded replay server is not started yet")
            return self._address
        return self._external_address

    @property
    def server_actor(self):
        """The Ray actor running the server (with replay_resources), else None."""
        return self._actor

    @property
    def client_kwargs(self) -> Dict[str, Any]:
        """The credentials every client of the replay server needs (token, root_certificates),
        as keyword arguments of `Client` and `ReplayDataset`; empty for a server the trainer
        starts without replay_token_file and TLS."""
        return dict(self._client_kwargs)

    def dataset(self, table: str, max_in_flight_samples_per_worker: int, **kwargs):
        """A `replay.ReplayDataset` of the declared `table`, typed by its declared signature (so
        a table on an external server needs no signature of its own). `kwargs` go to
        ReplayDataset (num_workers_per_iterator, rate_limiter_timeout_ms, ...). The service owns
        it: `close_datasets` (and `stop`) close it, ending the pipelines built on it.

        Raises:
          InvalidConfigError: `table` was not declared with a signature.
        """
        dataset = declared_table_dataset(
            self.address, table, self._tables, "this trainer's replay service",
            max_in_flight_samples_per_worker, self._client_kwargs, **kwargs)
        self._datasets.append(dataset)
        return dataset

    def close_datasets(self) -> None:
        """Closes every dataset `dataset` opened: their streams end now, quietly, also those
        waiting for samples, so learners' iterators can be released before the server stops."""
        datasets, self._datasets = self._datasets, []
        for dataset in datasets:
            dataset.close()

    def client(self):
        if self._client is None:
            from replay import Client

            self._client = Client(self.address, **self._client_kwargs)
        return self._client

    def checkpoint(self) -> str:
        """Checkpoints the replay server's tables; returns the checkpoint path."""
        return self.client().checkpoint()

    def save_checkpoint(self, directory: Optional[str]) -> Optional[str]:
        """Writes the tables (items, priorities, times sampled, counters) and returns the
        checkpoint's path: an embedded server's under `directory` (None when the embedded server
        never started: the optimizer uses no tables); an external server writes its own
        checkpoint (into its --checkpoint-dir, `directory` is unused).

        Raises:
          replay.errors.FailedPreconditionError: an external server without a checkpoint dir.
        """
        if not self.embedded:
            return self.checkpoint()
        if self._server is None:
            return None
        from replay.checkpoint import Checkpointer

        return Checkpointer(directory, keep=1).save(list(self._started_server().tables.values()))

    def load_checkpoint(self, directory: str) -> None:
        """Reloads the embedded server's tables from a `save_checkpoint` directory, in place:
        open writers and sample streams keep working and see the restored items. The tables keep
        the settings this trainer declares, as a `replay-server` restoring into its declared
        tables does (`replay.checkpoint.RESTORE_RULE`): the checkpoint supplies the contents, items
        sampled `max_times_sampled` times are deleted, the excess over `max_size` is evicted, the
        rate limiter is rebased, and the log names each setting that changed.

        Raises:
          CheckpointError: no complete checkpoint there, an unreadable one, a table this server
            does not serve, items that do not fit a table's signature, or an external server (it
            loads its own checkpoints when it starts).
        """
        from replay import errors as replay_errors
        from replay.checkpoint import Checkpointer
        from replay.checkpoint_files import MANIFEST, parse_manifest, read_file

        if not self.embedded:
            raise errors.CheckpointError(
                "replay tables can only be reloaded into the embedded replay server; an external "
                "replay-server loads its latest checkpoint from --checkpoint-dir when it starts")
        server = self._started_server()
        latest = Checkpointer(directory).latest()
        if latest is None:
            raise errors.CheckpointError(f"no complete replay checkpoint under {directory!r}")
        try:
            saved = [entry["config"]["name"] for entry in parse_manifest(latest, read_file(latest, MANIFEST))["tables"]]
        except replay_errors.ReplayError as exc:
            raise errors.CheckpointError(f"cannot read replay checkpoint {latest!r}: {exc}") from exc
        unknown = sorted(name for name in saved if name not in server.tables)
        if unknown:
            raise errors.CheckpointError(
                f"replay checkpoint {latest!r} holds tables {unknown} that this trainer does not "
                f"use (it has {sorted(server.tables)}); restore it into the same algorithm")
        try:
            loaded = Checkpointer.load(latest, declared={name: server.tables[name].config() for name in saved})
        except replay_errors.ReplayError as exc:
            raise errors.CheckpointError(f"cannot read replay checkpoint {latest!r}: {exc}") from exc
        for table in loaded:
            _, items, counters = table.checkpoint()
            try:
                server.tables[table.name].load_checkpoint(items, counters)
            except replay_errors.ReplayError as exc:
                raise errors.CheckpointError(
                    f"replay checkpoint {latest!r} does not fit table {table.name!r}: {exc}") from exc

    def _started_server(self):
        if self._server is None:
            raise errors.TfrlError("the embedded replay server is not started yet")
        return self._server

    def stop(self) -> None:
        self.close_datasets()  # before the server goes, so the streams end instead of failing
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._actor is not None:
            import ray

            try:
                ray.get(self._actor.stop.remote(), timeout=10)
            except Exception:  # noqa: BLE001 - the actor (or its node) may already be gone
                pass
            ray.kill(self._actor)
            self._actor = None
        self._address = None


@dataclasses.dataclass(frozen=True)
class SamplingRoundSettings(Settings):
    """The config keys that size an on-policy queue (`on_policy_queue_size`)."""

    num_workers: int = setting("remote rollout workers (0: the local worker samples)", minimum=0)
    num_envs_per_worker: int = setting("envs each worker steps together", minimum=1)
    rollout_fragment_length: int = setting("env steps per env in one sample()", minimum=1)
    train_batch_size: int = setting("steps of one train batch", minimum=1)


def on_policy_queue_size(config: dict) -> int:
    """Steps an on-policy queue holds at most before the learner reads: one train batch plus
    the sampling round that crosses it. A key `config` lacks takes COMMON_CONFIG's value, as it
    does for the WorkerSet that samples (two remote workers without `num_workers`).

    Raises:
      InvalidConfigError: one of those keys is ill-typed or out of range.
    """
    settings = SamplingRoundSettings.from_config(config)
    round_steps = (max(settings.num_workers, 1) * settings.num_envs_per_worker
                   * settings.rollout_fragment_length)
    return settings.train_batch_size + round_steps


def _yaml_entry(table) -> str:
    """The table's entry for a `replay-server --config` YAML, as the embedded server would have
    it, without a signature (the trainer brings its own)."""
    config = table.config()
    if config["rate_limiter"]["kind"] == "Queue":
        return f"{{name: {table.name}, kind: queue, max_size: {config['max_size']}}}"
    entry = {k: config[k] for k in ("name", "sampler", "remover", "max_size", "rate_limiter")}
    return _flow_yaml(entry)


def _flow_yaml(value) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()


def _signature_differences(declared, served) -> List[str]:
    """What keeps the items the trainer writes from matching the served table's signature."""
    import tree

    def flat(signature):
        return {"/".join(map(str, path)): spec for path, spec in tree.flatten_with_path(signature)}

    want, have = flat(declared), flat(served)
    problems = []
    if set(want) - set(have):
        problems.append(f"its signature lacks the column(s) {sorted(set(want) - set(have))} the trainer writes")
    if set(have) - set(want):
        problems.append(f"its signature has column(s) {sorted(set(have) - set(want))} the trainer does not write")
    for name in sorted(set(want) & set(have)):
        w, h = want[name], have[name]
        if not h.is_compatible_with(w.shape, w.dtype):
            problems.append(f"column {name!r} is {h.dtype.name}{list(h.shape)} there but the trainer "
                            f"writes {w.dtype.name}{list(w.shape)}")
    if problems:
        problems.append("leave the signature out of the YAML entry (the trainer brings its own) or "
                        "make it match")
    return problems
