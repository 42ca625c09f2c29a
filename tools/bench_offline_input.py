"""Learner throughput from recorded files versus the same batches in a replay table.

    python tools/bench_offline_input.py [--recorded-rows 20000] [--rows 100000]
                                        [--batch-size 500] [--rounds 2]

A MARWIL rollout worker plays CartPole and hands every sampled batch of `--batch-size` rows both
to its `output` (TFRecord files, lz4 columns) and to a replay table (tfrl's replay output, one
item per step), so files and table hold the same rows. A MARWIL policy (default 256x256 model)
then takes learner steps of `--batch-size` rows until it has trained `--rows` rows, reading:

    files-tfdata   tfrl.offline.offline_dataset over the files (the direct learner path)
    replay-tfdata  replay.ReplayDataset over the table, batched (the trainers' learner path)
    files-input    FileInput.next() -> policy.learn_on_batch (a rollout worker's `input: DIR`)
    replay-input   ReplayInput.next() -> learn_on_batch (`input: "replay://HOST:PORT/TABLE"`)

Prints the machine's load average first, then one line per case, `case rows/s`: the best of
`--rounds` rounds (the cases run in turn each round, so background load hits all of them).
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TABLE = "experience"
WARMUP_STEPS = 5


def record(directory: str, recorded_rows: int, batch_size: int):
    """A replay server holding `recorded_rows` CartPole steps that are also in TFRecord files
    under `directory`; returns (server, the learner's policy, the loss columns)."""
    from replay import Fifo, MinSize, Server, Table, Uniform

    from tfrl.agents.marwil import MARWILTFPolicy
    from tfrl.rollout import RolloutWorker
    from tfrl.rollout.replay_output import ReplayOutputSpec, replay_signature

    worker = RolloutWorker("CartPole-v1", MARWILTFPolicy, config={
        "rollout_fragment_length": batch_size, "seed": 0, "output": directory,
        "output_max_file_size": 4 * 1024 * 1024})
    policy = worker.get_policy()
    columns = sorted(policy.loss_input_signature)
    server = Server([Table(TABLE, sampler=Uniform(), remover=Fifo(), max_size=recorded_rows,
                           rate_limiter=MinSize(1),
                           signature=replay_signature(policy, columns))])
    try:
        worker.set_replay_output(ReplayOutputSpec(f"127.0.0.1:{server.port}", TABLE, columns))
        for _ in range(recorded_rows // batch_size):
            worker.sample()
    finally:
        worker.stop()
    learner = MARWILTFPolicy(policy.observation_space, policy.action_space, dict(policy.config))
    return server, learner, columns


def tf_data_case(policy, dataset, columns, steps: int) -> float:
    """Seconds for `steps` learner steps on the elements of `dataset` (after a warm-up)."""
    import tensorflow as tf

    learn = tf.function(policy.compute_and_apply_gradients, autograph=False)
    iterator = iter(dataset)
    for _ in range(WARMUP_STEPS):
        learn({c: t for c, t in next(iterator).items() if c in columns})
    started = time.perf_counter()
    for _ in range(steps):
        stats, _ = learn({c: t for c, t in next(iterator).items() if c in columns})
    stats["total_loss"].numpy()  # waits for the last step
    return time.perf_counter() - started


def reader_case(policy, reader, steps: int) -> float:
    """Seconds for `steps` learn_on_batch calls on batches of `reader` (after a warm-up)."""
    for _ in range(WARMUP_STEPS):
        policy.learn_on_batch(reader.next())
    started = time.perf_counter()
    for _ in range(steps):
        policy.learn_on_batch(reader.next())
    return time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recorded-rows", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=100_000, help="rows trained per case")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"load_avg={' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)

    import tensorflow as tf
    from replay import ReplayDataset

    from tfrl.offline import offline_dataset
    from tfrl.offline.input_reader import FileInput, resolve_input_files
    from tfrl.offline.replay_input import ReplayInput, ReplayInputSpec

    steps = max(args.rows // args.batch_size, 1)
    with tempfile.TemporaryDirectory() as directory:
        server, policy, columns = record(directory, args.recorded_rows, args.batch_size)
        address = f"127.0.0.1:{server.port}"
        try:
            replay = ReplayDataset.from_table_signature(
                address, TABLE, max_in_flight_samples_per_worker=2 * args.batch_size)
            cases = {
                "files-tfdata": lambda: tf_data_case(policy, offline_dataset(
                    directory, args.batch_size, columns=columns, seed=0), columns, steps),
                "replay-tfdata": lambda: tf_data_case(policy, replay.batch(
                    args.batch_size, drop_remainder=True).map(
                    lambda sample: sample.data).prefetch(tf.data.AUTOTUNE), columns, steps),
                "files-input": lambda: reader_case(
                    policy, FileInput(resolve_input_files(directory), seed=0), steps),
                "replay-input": lambda: reader_case(
                    policy, ReplayInput(ReplayInputSpec(address, TABLE, args.batch_size)), steps),
            }
            best = {name: float("inf") for name in cases}
            for _ in range(args.rounds):
                for name, case in cases.items():
                    best[name] = min(best[name], case())
            replay.close()
        finally:
            server.stop()
    rows = steps * args.batch_size
    for name, seconds in best.items():
        print(f"{name} {rows / seconds:.0f}", flush=True)


if __name__ == "__main__":
    main()
