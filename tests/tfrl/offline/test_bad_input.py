"""Damaged recorded files: a truncated or corrupted record stops a trainer with CorruptRecordError
naming the file and the record's byte offset; with `input_skip_corrupt: True` the trainer logs
the file, skips the rest of it and learns from the others."""
import glob
import logging
import os

import pytest

from tfrl.agents.pg import PGTFPolicy
from tfrl.registry import get_trainer_class
from tfrl.errors import CorruptRecordError, NoInputFilesError, UnsupportedRecordError
from tfrl.offline.input_reader import FileInput, read_file
from tfrl.rollout import RolloutWorker

SMALL = {"fcnet_hiddens": [8]}


@pytest.fixture
def recorded(tmp_path):
    """Three TFRecord files of two 50-row batches each and one JSON file, from a real worker."""
    out = str(tmp_path / "data")
    worker = RolloutWorker("CartPole-v1", PGTFPolicy, config={
        "model": SMALL, "rollout_fragment_length": 50, "seed": 1, "output": out,
        "output_max_file_size": 1})
    json_worker = RolloutWorker("CartPole-v1", PGTFPolicy, config={
        "model": SMALL, "rollout_fragment_length": 50, "seed": 2, "output": str(tmp_path / "json"),
        "output_format": "json", "output_max_file_size": 10**9})
    try:
        for _ in range(3):  # one record per file with output_max_file_size 1
            worker.sample()
        json_worker.sample()
        json_worker.sample()
    finally:
        worker.stop()
        json_worker.stop()
    files = sorted(glob.glob(os.path.join(out, "*.tfrecord")))
    assert len(files) == 3
    return out, files, glob.glob(str(tmp_path / "json" / "*.json"))[0]


def truncate(path, keep_bytes):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep_bytes])
    return len(data)


def test_a_truncated_file_names_the_file_and_the_record_offset(recorded):
    _, files, _ = recorded
    size = truncate(files[1], 100)
    assert size > 100
    with pytest.raises(CorruptRecordError) as caught:
        list(read_file(files[1]))
    assert caught.value.path == files[1] and caught.value.offset == 0
    assert files[1] in str(caught.value) and "byte offset 0" in str(caught.value)
    assert "input_skip_corrupt" in str(caught.value)


def test_a_flipped_byte_in_the_second_record_gives_that_records_offset(recorded, tmp_path):
    _, files, _ = recorded
    two = str(tmp_path / "two.tfrecord")
    first, second = open(files[0], "rb").read(), open(files[2], "rb").read()
    damaged = bytearray(first + second)
    damaged[len(first) + 40] ^= 0x55
    open(two, "wb").write(bytes(damaged))
    batches = read_file(two)
    assert next(batches).count == 50  # the record before the damage is handed out
    with pytest.raises(CorruptRecordError, match=f"byte offset {len(first)}") as caught:
        next(batches)
    assert caught.value.offset == len(first)


def test_a_damaged_json_line_names_its_offset(recorded, tmp_path):
    _, _, json_file = recorded
    lines = open(json_file, "rb").read().splitlines(keepends=True)
    assert len(lines) == 2
    damaged = str(tmp_path / "damaged.json")
    open(damaged, "wb").write(lines[0] + lines[1][: len(lines[1]) // 2])
    batches = read_file(damaged)
    assert next(batches).count == 50
    with pytest.raises(CorruptRecordError, match=f"byte offset {len(lines[0])}"):
        next(batches)


@pytest.mark.timeout(240)
def test_a_trainer_stops_on_a_corrupt_file_or_skips_it_when_asked(ray_session, recorded, caplog):
    directory, files, _ = recorded
    truncate(files[1], 100)
    config = {"env": "CartPole-v1", "input": directory, "model": SMALL, "train_batch_size": 200,
              "seed": 0}
    trainer = get_trainer_class("BC")(config=config)
    try:
        with pytest.raises(CorruptRecordError, match=os.path.basename(files[1])):
            trainer.train()
    finally:
        trainer.stop()
    trainer = get_trainer_class("BC")(config=dict(config, input_skip_corrupt=True))
    try:
        with caplog.at_level(logging.WARNING, logger="tfrl.offline.input_reader"):
            result = trainer.train()
    finally:
        trainer.stop()
    assert result["info"]["num_steps_sampled"] >= 200  # the two good files, read in turn
    assert any(files[1] in r.getMessage() for r in caplog.records)


def test_input_that_names_no_files_is_a_named_error(tmp_path):
    with pytest.raises(NoInputFilesError, match="names no experience files"):
        RolloutWorker("CartPole-v1", PGTFPolicy, config={"input": str(tmp_path / "none"),
                                                        "model": SMALL})


def test_only_corrupt_files_is_a_named_error_not_an_endless_loop(recorded):
    _, files, _ = recorded
    truncate(files[0], 10)
    reader = FileInput([files[0]], skip_corrupt=True)
    with pytest.raises(NoInputFilesError, match="hold no readable batch"):
        reader.next()


def test_classic_rllib_pickled_columns_are_refused_unread(tmp_path):
    line = ('{"type": "SampleBatch", "obs": "BCJNGGhAZAAAAAAAAADhsAAAAAAA", '
            '"actions": [0], "rewards": [1.0], "dones": [false]}\n')
    path = tmp_path / "classic.json"
    path.write_text(line)
    with pytest.raises(UnsupportedRecordError, match="does not unpickle"):
        next(read_file(str(path)))
