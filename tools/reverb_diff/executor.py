"""The differential tool's executor: runs operation sequences against one Reverb-API module and
prints what every call returned or raised, as JSON.

It runs with either Python: dm-reverb 0.14's (`--module reverb`) or this project's
(`--module replay.reverb`), so it imports nothing of the project and nothing but the standard
library, numpy and the module named. It reads a JSON list of sequences (see generate.py for the
format) from a file or stdin and writes one JSON object per sequence, in order, one a line.

Sequences run in batches: one server per batch holding the tables of every sequence in it (each
sequence's tables get a prefix of their own, so every sequence starts on fresh tables), and the
process's one client. Calls that would block (a sample or insert the rate limiter refuses) are
not made: `can_sample`/`can_insert` on the table decide and the observation says "blocks";
writer flushes take short timeouts, so blocking shows as DeadlineExceededError.
"""
import argparse
import importlib
import json
import os
import sys
import tempfile
import time
import traceback

import numpy as np

# Each op goes to stderr before it runs (to find a call that blocks).
TRACE = bool(os.environ.get("REVERB_DIFF_TRACE"))
# The timeout of a flush made again because the limiter admits what it waits for.
LONG_TIMEOUT_MS = 20_000


def _error(e):
    """An exception as an observable: its class, the names of every class it is an instance of
    (so `InvalidArgumentError(ValueError)` matches Reverb's `ValueError`), and its message."""
    names = [c.__name__ for c in type(e).__mro__ if c not in (object, BaseException, Exception)]
    return {"error": type(e).__name__, "isa": names, "message": str(e)[:300]}


def step_value(spec, tag):
    """The array a step with tag `tag` holds in a column of spec [dtype, shape]."""
    dtype, shape = spec
    size = int(np.prod(shape)) if shape else 1
    values = np.arange(size, dtype=np.int64) + 100 * int(tag)
    return values.reshape(shape).astype(dtype)


def encode(value):
    """An array (or a nest of them) as JSON: [dtype, shape, flat values]."""
    if isinstance(value, dict):
        return {k: encode(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    array = np.asarray(value)
    flat = array.reshape(-1)
    if array.dtype.kind == "f":
        values = [float(x) for x in flat]
    elif array.dtype.kind in "iub":
        values = [int(x) for x in flat]
    else:
        values = [str(x) for x in flat]
    return [str(array.dtype), list(array.shape), values]


def _info_fields(info):
    rl = info.rate_limiter_info
    return {
        "max_size": int(info.max_size),
        "max_times_sampled": int(info.max_times_sampled),
        "current_size": int(info.current_size),
        "num_episodes": int(info.num_episodes),
        "num_deleted_episodes": int(info.num_deleted_episodes),
        "num_unique_samples": int(info.num_unique_samples),
        "rate_limiter": {
            "samples_per_insert": float(rl.samples_per_insert),
            "min_diff": float(rl.min_diff),
            "max_diff": float(rl.max_diff),
            "min_size_to_sample": int(rl.min_size_to_sample),
            "inserts": int(rl.insert_stats.completed),
            "samples": int(rl.sample_stats.completed),
        },
        "has_signature": info.signature is not None,
    }


class Batch:
    """One server with the tables of a batch of sequences, and a client to it."""

    def __init__(self, module_name, reverb, sequences, checkpoint_dir):
        self.module_name = module_name
        self.reverb = reverb
        self.tables = {}
        self.table_errors = {}  # sequence index -> the error its table configuration raised
        tables = []
        for index, sequence in enumerate(sequences):
            built = []
            try:
                for config in sequence["tables"]:
                    built.append((config["name"], self._table(f"s{index}_{config['name']}", config)))
            except Exception as e:  # noqa: BLE001 - a refused configuration is an observable
                self.table_errors[index] = _error(e)
                continue
            for name, table in built:
                self.tables[(index, name)] = table
                tables.append(table)
        checkpointer = None
        if checkpoint_dir is not None:
            checkpointer = reverb.checkpointers.DefaultCheckpointer(checkpoint_dir)
        self.server = reverb.Server(tables=tables, checkpointer=checkpointer)
        self.client = reverb.Client(f"localhost:{self.server.port}")

    def _signature(self, spec):
        if spec is None:
            return None
        import tensorflow as tf
        return {name: tf.TensorSpec(shape, tf.as_dtype(dtype)) for name, (dtype, shape) in spec.items()}

    def _selector(self, spec):
        kind = spec[0]
        if kind == "Prioritized":
            return self.reverb.selectors.Prioritized(spec[1])
        return getattr(self.reverb.selectors, kind)()

    def _table(self, name, config):
        reverb = self.reverb
        signature = self._signature(config.get("signature"))
        kind = config.get("kind", "table")
        if kind == "queue":
            return reverb.Table.queue(name, config["max_size"], signature=signature)
        if kind == "stack":
            return reverb.Table.stack(name, config["max_size"], signature=signature)
        limiter_kind, *args = config["rate_limiter"]
        if limiter_kind == "SampleToInsertRatio":
            limiter = reverb.rate_limiters.SampleToInsertRatio(
                samples_per_insert=args[0], min_size_to_sample=args[1], error_buffer=args[2])
        else:
            limiter = getattr(reverb.rate_limiters, limiter_kind)(*args)
        return reverb.Table(name=name, sampler=self._selector(config["sampler"]),
                            remover=self._selector(config["remover"]), max_size=config["max_size"],
                            max_times_sampled=config.get("max_times_sampled", 0), rate_limiter=limiter,
                            signature=signature)

    def close(self):
        self.client = None
        self.server.stop()


class SequenceRun:
    """The state of one sequence while it runs: its writers and the item keys it has seen."""

    def __init__(self, batch, index, sequence):
        self.batch = batch
        self.reverb = batch.reverb
        self.client = batch.client
        self.index = index
        self.sequence = sequence
        self.columns = sequence.get("columns", {"id": ["int64", []]})
        self.writers = {}
        self.keys = {}  # item id (from its data) -> key, learned by sampling
        # Inserts each table's rate limiter will have counted once the writes that returned
        # have landed, and the items each writer holds until its next flush or close.
        self.expected = {config["name"]: 0 for config in sequence["tables"]}
        self.pending = {}

    def settle(self, _name=None):
        """Waits until the writes that returned are visible in the tables: Reverb confirms an item
        to its writer before its table's worker has inserted it (or, for the legacy Writer, does
        not wait for a confirmation at all), so a sample right after a flush can miss it. Waits
        (2 s at most: an item the server refused never lands) until every table's insert count
        reaches what the successful writes add up to."""
        deadline = time.monotonic() + 2.0
        for name, expected in self.expected.items():
            table = self.table(name)
            while int(table.info.rate_limiter_info.insert_stats.completed) < expected:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.0005)

    def _landed(self, writer_id):
        """A writer's flush or close returned: the items it held count as sent."""
        for name, count in self.pending.pop(writer_id, {}).items():
            self.expected[name] += count

    def _created(self, writer_id, table):
        held = self.pending.setdefault(writer_id, {})
        held[table] = held.get(table, 0) + 1

    def table_name(self, name):
        return f"s{self.index}_{name}"

    def table(self, name):
        return self.batch.tables[(self.index, name)]

    def run(self):
        if self.index in self.batch.table_errors:
            return [{"tables": self.batch.table_errors[self.index]}]
        observations = []
        for op in self.sequence["ops"]:
            if TRACE:
                sys.stderr.write(f"seq {self.sequence.get('index')} {json.dumps(op)}\n")
                sys.stderr.flush()
            handler = getattr(self, "op_" + op["op"])
            try:
                result = handler(op)
                observations.append({"ok": result})
            except Exception as e:  # noqa: BLE001 - whatever a call raises is an observable
                observations.append(_error(e))
        for writer in self.writers.values():
            try:
                writer.close()
            except Exception:  # noqa: BLE001, S110 - closing at the end observes nothing
                pass
        return observations

    # ---------------------------------------------------------------- data
    def step(self, tags, casts=None):
        """A step's data: column -> array for each column in `tags` (column -> tag)."""
        casts = casts or {}
        data = {}
        for column, tag in tags.items():
            spec = self.columns[column]
            if column in casts:
                spec = casts[column]
            data[column] = step_value(spec, tag)
        return data

    def _sample_observable(self, sample, emit_timesteps):
        if emit_timesteps:
            info = sample[0].info if sample else None
            data = [encode(list(step.data)) for step in sample]
            flat = [np.asarray(col) for col in sample[0].data] if sample else []
        else:
            info = sample.info
            data = encode(list(sample.data))
            flat = [np.asarray(col) for col in sample.data]
        if flat and flat[0].size:
            self.keys[int(flat[0].reshape(-1)[0]) // 100] = int(info.key)
        return {"data": data, "probability": float(info.probability), "table_size": int(info.table_size),
                "priority": float(info.priority), "times_sampled": int(info.times_sampled)}

    # ---------------------------------------------------------------- client and table ops
    def op_insert(self, op):
        """client.insert of one step (tags) into tables with priorities; refused by the limiter
        of any of them -> 'blocks' (not called)."""
        for name in op["priorities"]:
            self.settle(name)
            if not self.table(name).can_insert(1):
                return "blocks"
        data = self.step(op["step"], op.get("cast"))
        self.client.insert(data, {self.table_name(t): p for t, p in op["priorities"].items()})
        for name in op["priorities"]:
            self.expected[name] += 1
        return None

    def op_sample(self, op):
        """client.sample of num_samples, each only if the limiter allows it."""
        results = []
        self.settle(op["table"])
        table = self.table(op["table"])
        for _ in range(op.get("num_samples", 1)):
            if not table.can_sample(1):
                results.append("blocks")
                continue
            emit = op.get("emit_timesteps", False)
            sample = next(iter(self.client.sample(self.table_name(op["table"]), 1, emit_timesteps=emit)))
            results.append(self._sample_observable(sample, emit))
        return results

    def op_drain(self, op):
        """Samples until the limiter refuses (the tables of these sequences remove what they
        sample), at most `limit` items."""
        results = []
        self.settle(op["table"])
        table = self.table(op["table"])
        while table.can_sample(1) and len(results) < op.get("limit", 50):
            sample = next(iter(self.client.sample(self.table_name(op["table"]), 1, emit_timesteps=False)))
            results.append(self._sample_observable(sample, False))
        return results

    def op_distribution(self, op):
        """`n` samples in one call: per item id, how often it came and the probabilities given."""
        counts = {}
        probabilities = {}
        for sample in self.client.sample(self.table_name(op["table"]), op["n"], emit_timesteps=False):
            item = int(np.asarray(sample.data[0]).reshape(-1)[0]) // 100
            counts[item] = counts.get(item, 0) + 1
            probabilities.setdefault(item, set()).add(round(float(sample.info.probability), 6))
        return {"counts": {str(k): v for k, v in sorted(counts.items())},
                "probabilities": {str(k): sorted(v) for k, v in sorted(probabilities.items())}}

    def op_can(self, op):
        self.settle(op["table"])
        table = self.table(op["table"])
        return {"sample": bool(table.can_sample(op.get("n", 1))), "insert": bool(table.can_insert(op.get("n", 1)))}

    def op_mutate(self, op):
        """mutate_priorities by item id; ids never seen in a sample go as keys no item has."""
        updates = {self.keys.get(int(i), 10**12 + int(i)): p for i, p in op.get("updates", {}).items()}
        deletes = [self.keys.get(int(i), 10**12 + int(i)) for i in op.get("deletes", [])]
        known = sorted(int(i) for i in list(op.get("updates", {})) + op.get("deletes", []) if int(i) in self.keys)
        self.client.mutate_priorities(self.table_name(op["table"]), updates=updates, deletes=deletes)
        return {"known": known}

    def op_reset(self, op):
        self.settle()
        self.client.reset(self.table_name(op["table"]))
        self.expected[op["table"]] = 0

    def op_info(self, op):
        for name in op["tables"]:
            self.settle(name)
        infos = self.client.server_info()
        return {name: _info_fields(infos[self.table_name(name)]) for name in op["tables"]}

    def op_checkpoint(self, op):
        path = self.client.checkpoint()
        return {"is_str": isinstance(path, str)}

    def op_dataset(self, op):
        """The elements a TrajectoryDataset or TimestepDataset (from the table's signature) yields
        for take(n), and the error that ended it early, if any."""
        self.settle()
        kind = {"trajectory": "TrajectoryDataset", "timestep": "TimestepDataset"}[op["kind"]]
        dataset = getattr(self.reverb, kind).from_table_signature(
            server_address=f"localhost:{self.batch.server.port}", table=self.table_name(op["table"]),
            max_in_flight_samples_per_worker=op["max_in_flight"], rate_limiter_timeout_ms=op["timeout_ms"])
        elements = []
        ended = None
        try:
            for sample in dataset.take(op["take"]):
                data = sample.data
                flat = [data[k] for k in sorted(data)] if isinstance(data, dict) else list(data)
                elements.append({"data": encode(flat), "priority": float(sample.info.priority),
                                 "table_size": int(sample.info.table_size),
                                 "times_sampled": int(sample.info.times_sampled)})
        except Exception as e:  # noqa: BLE001 - how the dataset ended is an observable
            ended = _error(e)
        return {"elements": elements, "ended": ended}

    # ---------------------------------------------------------------- TrajectoryWriter
    def op_tw_open(self, op):
        self.writers[op.get("w", 0)] = self.client.trajectory_writer(
            num_keep_alive_refs=op["num_keep_alive_refs"], validate_items=op.get("validate_items", True))

    def _writer_state(self, writer):
        """episode_steps and the length of each column's history (or what reading it raised)."""
        try:
            history = writer.history
            lengths = {k: len(v) for k, v in sorted(history.items())} if isinstance(history, dict) else {}
        except Exception as e:  # noqa: BLE001 - an observable too
            lengths = _error(e)
        return {"episode_steps": int(writer.episode_steps), "history": lengths}

    def op_append(self, op):
        writer = self.writers[op.get("w", 0)]
        writer.append(self.step(op["step"], op.get("cast")), partial_step=op.get("partial", False))
        return self._writer_state(writer)

    def _column(self, writer, ref):
        column, index = ref
        history = writer.history[column]
        if isinstance(index, dict):
            index = slice(index.get("start"), index.get("stop"), index.get("step"))
        return history[index]

    def op_item(self, op):
        writer = self.writers[op.get("w", 0)]
        trajectory = {name: self._column(writer, ref) for name, ref in op["trajectory"].items()}
        if self.batch.module_name == "reverb" and any(len(c) == 0 for c in trajectory.values()):
            # Reverb 0.14's create_item dies of a segmentation fault on an empty column.
            return {"not_called": "reverb crashes on an empty column"}
        lengths = {name: len(column) for name, column in trajectory.items()}
        writer.create_item(self.table_name(op["table"]), op["priority"], trajectory)
        self._created(op.get("w", 0), op["table"])
        return lengths

    def _until_limiter_refuses(self, writer_id, call, timeout_ms):
        """call(timeout_ms), where a DeadlineExceededError counts only when the rate limiter of a
        table the writer holds items for refuses an insert. A short timeout is how a sequence
        sees what blocks, but on a busy machine it can also run out while an item the limiter
        admits is still on its way (on either side); such a call is made again with a long
        timeout, so what is observed is the limiter's decision, not the machine's speed."""
        try:
            call(timeout_ms)
        except Exception as e:  # noqa: BLE001 - re-raised unless it is a timeout to look at
            if "DeadlineExceeded" not in type(e).__name__:
                raise
            if any(self._refuses(name, count) for name, count in self.pending.get(writer_id, {}).items()):
                raise
            call(LONG_TIMEOUT_MS)

    def _refuses(self, name, pending):
        """Whether table `name`'s limiter holds back items of the `pending` a writer holds for it:
        it refuses an insert and they have not all landed (an item that lands just after a
        timeout can itself fill the table)."""
        table = self.table(name)
        landed = int(table.info.rate_limiter_info.insert_stats.completed) >= self.expected[name] + pending
        return not landed and not table.can_insert(1)

    def op_flush(self, op):
        writer_id = op.get("w", 0)
        writer = self.writers[writer_id]
        self._until_limiter_refuses(
            writer_id, lambda ms: writer.flush(op.get("block_until_num_items", 0), timeout_ms=ms), op["timeout_ms"])
        self._landed(writer_id)

    def op_end_episode(self, op):
        writer_id = op.get("w", 0)
        writer = self.writers[writer_id]
        self._until_limiter_refuses(
            writer_id, lambda ms: writer.end_episode(clear_buffers=op.get("clear_buffers", True), timeout_ms=ms),
            op["timeout_ms"])
        self._landed(writer_id)
        return self._writer_state(writer)

    def op_tw_close(self, op):
        """close(), and whether it took over 2 s (it waited on items a rate limiter holds)."""
        started = time.monotonic()
        self.writers.pop(op.get("w", 0)).close()
        self._landed(op.get("w", 0))
        return {"waited": time.monotonic() - started > 2.0}

    # ---------------------------------------------------------------- StructuredWriter
    def _condition(self, spec):
        """A condition from ["step_index"|"steps_since_applied", mod, cmp, value],
        ["data", column, mod, cmp, value] or ["is_end_episode"]."""
        conditions = self.reverb.structured_writer.Condition
        if spec[0] == "is_end_episode":
            return conditions.is_end_episode()
        if spec[0] == "data":
            builder = conditions.data({c: None for c in self.columns})[spec[1]]
            spec = spec[1:]
        else:
            builder = getattr(conditions, spec[0])()
        _, mod, comparison, value = spec
        if mod:
            builder = builder % mod
        return getattr(builder, comparison)(value)

    def _config(self, config):
        structured = self.reverb.structured_writer
        step = {c: None for c in self.columns}

        def transform(ref):
            pattern = {}
            for name, (column, index) in config["pattern"].items():
                if isinstance(index, dict):
                    index = slice(index.get("start"), index.get("stop"), index.get("step"))
                pattern[name] = ref[column][index]
            return pattern

        return structured.create_config(structured.pattern_from_transform(step, transform),
                                        self.table_name(config["table"]),
                                        conditions=[self._condition(c) for c in config.get("conditions", [])])

    def op_sw_open(self, op):
        self.writers[op.get("w", 0)] = self.client.structured_writer([self._config(c) for c in op["configs"]])

    def op_sw_append(self, op):
        writer = self.writers[op.get("w", 0)]
        # The structured writer takes the whole step structure every time, None where a partial
        # step leaves a column out.
        data = dict({c: None for c in self.columns}, **self.step(op["step"], op.get("cast")))
        writer.append(data, partial_step=op.get("partial", False))
        return {"step_is_open": bool(writer.step_is_open)}

    def op_sw_flush(self, op):
        self.writers[op.get("w", 0)].flush(timeout_ms=op["timeout_ms"])

    def op_sw_end_episode(self, op):
        self.writers[op.get("w", 0)].end_episode(clear_buffers=op.get("clear_buffers", True),
                                                 timeout_ms=op["timeout_ms"])

    # ---------------------------------------------------------------- legacy Writer
    def op_w_open(self, op):
        self.writers[op.get("w", 0)] = self.client.writer(max_sequence_length=op["max_sequence_length"])

    def op_w_append(self, op):
        self.writers[op.get("w", 0)].append(self.step(op["step"], op.get("cast")))

    def op_w_append_sequence(self, op):
        steps = [self.step(tags) for tags in op["steps"]]
        sequence = {c: np.stack([s[c] for s in steps]) for c in steps[0]} if steps else {}
        self.writers[op.get("w", 0)].append_sequence(sequence)

    def op_w_item(self, op):
        self.writers[op.get("w", 0)].create_item(self.table_name(op["table"]), op["num_timesteps"], op["priority"])
        self._created(op.get("w", 0), op["table"])

    def op_w_flush(self, op):
        self.writers[op.get("w", 0)].flush()
        self._landed(op.get("w", 0))

    def op_w_close(self, op):
        self.writers.pop(op.get("w", 0)).close()
        self._landed(op.get("w", 0))


def run_sequences(module_name, sequences, batch_size=200):
    """Every sequence's observations, in order (a list per sequence)."""
    reverb = importlib.import_module(module_name)
    results = []
    needs_checkpoints = any(op["op"] == "checkpoint" for s in sequences for op in s["ops"])
    with tempfile.TemporaryDirectory() as checkpoint_dir:
        for start in range(0, len(sequences), batch_size):
            chunk = sequences[start:start + batch_size]
            # each batch's server checkpoints into a folder of its own: Reverb's server loads the
            # latest checkpoint it finds there, and an earlier batch's has other tables
            batch_dir = os.path.join(checkpoint_dir, f"batch{start}")
            batch = Batch(module_name, reverb, chunk, batch_dir if needs_checkpoints else None)
            try:
                for index, sequence in enumerate(chunk):
                    try:
                        results.append(SequenceRun(batch, index, sequence).run())
                    except Exception as e:  # noqa: BLE001 - a broken sequence is reported, the rest run
                        results.append([{"crash": traceback.format_exc(limit=3), **_error(e)}])
            finally:
                batch.close()
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--module", required=True, help="reverb or replay.reverb")
    parser.add_argument("--input", default="-", help="JSON list of sequences (default stdin)")
    parser.add_argument("--batch-size", type=int, default=200)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    text = sys.stdin.read() if args.input == "-" else open(args.input).read()
    sequences = json.loads(text)
    started = time.time()
    results = run_sequences(args.module, sequences, args.batch_size)
    for observations in results:
        sys.stdout.write(json.dumps(observations, sort_keys=True) + "\n")
    sys.stderr.write(f"executor {args.module}: {len(sequences)} sequences in {time.time() - started:.1f}s\n")


if __name__ == "__main__":
    main()
