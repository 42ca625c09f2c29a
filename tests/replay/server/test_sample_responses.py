"""How a sample stream spreads its budget over responses: large items come a quarter of the
budget to a response (so the server keeps sending while the reader receives), small items a whole
budget to one response."""
import numpy as np

from replay import rate_limiters, selectors
from replay.server import Server
from replay.table import Table


def _server_with(item_floats: int, count: int):
    server = Server([Table("t", selectors.Uniform(seed=0), selectors.Fifo(), 1000, rate_limiters.MinSize(1))])
    rng = np.random.default_rng(0)
    with server.localhost_client().trajectory_writer(1) as writer:
        for _ in range(count):  # incompressible
            writer.create_item("t", 1.0, writer.append(rng.random(item_floats, dtype=np.float32)))
    return server


def _samples_per_response(item_floats: int, count: int):
    """How many samples each response carried: 400 samples of a table of `count` items of
    `item_floats` float32s, with 80 samples in flight."""
    server = _server_with(item_floats, count)
    try:
        client = server.localhost_client()
        counts = [len(r.response.probabilities)
                  for r in client.sample_responses("t", max_in_flight=80, max_samples=400, timeout=60)]
        client.close()
    finally:
        server.stop(grace=0)
    return counts


def test_large_items_come_a_quarter_of_the_budget_to_a_response():
    counts = _samples_per_response(25_000, 200)  # 100 kB items (enough that few repeat in a response)
    assert sum(counts) == 400
    # after the first response (sized before any item's size was known): 20 of the 80
    assert max(counts[1:]) == 20


def test_small_items_come_a_whole_budget_to_a_response():
    counts = _samples_per_response(10, 30)  # 40 B items
    assert sum(counts) == 400 and max(counts) == 80
