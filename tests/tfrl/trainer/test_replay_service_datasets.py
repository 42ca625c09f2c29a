"""The trainer's replay service owns the datasets it opens: stopping it ends their streams (and
the pipelines built on them) before the embedded server goes, instead of leaving a learner's
iterator waiting on an empty table or failing on a vanished server."""

import numpy as np
import pytest

from replay.specs import TensorSpec
from replay.table import Table
from tfrl.replay_hosting import ReplayService

from tests.background_reads import next_in_background

pytestmark = pytest.mark.timeout(120)


def test_stop_closes_the_datasets_the_service_opened():
    service = ReplayService({})
    service.add_table(Table.queue("rollouts", 100, signature={"x": TensorSpec((2,), np.float32)}))
    service.start()
    client = service.client()
    with client.trajectory_writer(1) as writer:  # an item of one step's x, without time dimension
        writer.append({"x": np.ones(2, np.float32)})
        writer.create_item("rollouts", 1.0, {"x": writer.history["x"][-1]})
    dataset = service.dataset("rollouts", max_in_flight_samples_per_worker=4)
    iterator = iter(dataset.batch(1).map(lambda sample: sample.data["x"]))
    assert next(iterator).numpy().tolist() == [[1.0, 1.0]]
    reader, outcome = next_in_background(iterator)
    reader.join(timeout=1.0)
    assert reader.is_alive()  # the queue is drained: the stream waits for a sample
    service.stop()
    reader.join(timeout=60)
    assert outcome == ["ended"]  # closed before the server stopped: an end, not UnavailableError
    assert dataset.closed
