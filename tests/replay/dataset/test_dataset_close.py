"""`replay_close()` ends a dataset's streams at once, also those waiting for samples that will not
come (a drained queue of a server that keeps running), so its iterator can be released."""
import threading

import pytest

from replay.dataset import ReplayDataset

pytestmark = pytest.mark.timeout(120)


def test_replay_close_ends_a_stream_waiting_on_an_empty_table(start_server, helpers):
    server = start_server([helpers.queue_table()])
    client = server.localhost_client()
    helpers.write_steps(client, "queue", range(3))
    dataset = ReplayDataset.from_table_signature(client.address, "queue",
                                                 max_in_flight_samples_per_worker=4)  # waits forever
    iterator = iter(dataset)
    assert sorted(int(next(iterator).data["action"]) for _ in range(3)) == [0, 1, 2]

    outcome = []

    def read_on():
        try:
            outcome.append(next(iterator))
        except StopIteration:
            outcome.append("ended")
        except Exception as e:  # reported below
            outcome.append(e)

    reader = threading.Thread(target=read_on, daemon=True)
    reader.start()
    reader.join(timeout=1.0)
    assert reader.is_alive()  # the queue is drained: the stream waits for a sample
    dataset.replay_close()
    reader.join(timeout=60)
    assert outcome == ["ended"]  # end of sequence, not an error, and not a stuck stream
    del iterator
    # The server was not stopped and still serves others.
    helpers.write_steps(client, "queue", [7])
    assert client.server_info(timeout=10)["queue"].num_inserts == 4
