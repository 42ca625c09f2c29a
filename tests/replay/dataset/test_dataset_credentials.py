"""ReplayDataset and ShardedClient against servers that need a token, TLS, or both: the
credentials reach every channel they open."""
import pickle

import pytest
import tensorflow as tf

from replay import errors
from replay.client import connect
from replay.dataset import ReplayDataset
from replay.server import Server
from replay.sharded_client import ShardedClient
from tests.replay.tls import self_signed_certificate

pytestmark = pytest.mark.timeout(120)

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def tls_pair():
    return self_signed_certificate()


@pytest.fixture
def servers():
    started = []

    def start(helpers, **kwargs):
        server = Server([helpers.queue_table()], **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(grace=0)


def _actions(dataset):
    return sorted(int(e.data["action"]) for e in dataset)


@pytest.mark.parametrize("security", ["token", "tls", "tls+token"])
def test_replay_dataset_reads_from_a_server_with_token_or_tls(servers, helpers, tls_pair, security):
    certificate, key = tls_pair
    server_kwargs, credentials = {}, {}
    if "token" in security:
        server_kwargs["token"] = credentials["token"] = TOKEN
    if "tls" in security:
        server_kwargs.update(tls_certificate=certificate, tls_private_key=key)
        credentials["root_certificates"] = certificate
    server = servers(helpers, **server_kwargs)
    helpers.write_steps(server.localhost_client(), "queue", range(12))
    address = f"localhost:{server.port}"

    dataset = ReplayDataset.from_table_signature(
        address, "queue", max_in_flight_samples_per_worker=4, rate_limiter_timeout_ms=300, **credentials)
    assert _actions(dataset) == list(range(12))

    helpers.write_steps(server.localhost_client(), "queue", range(12, 20))
    explicit = ReplayDataset(address, "queue", dtypes=tf.nest.map_structure(lambda s: s.dtype,
                                                                             helpers.STEP_SIGNATURE),
                             shapes=tf.nest.map_structure(lambda s: s.shape, helpers.STEP_SIGNATURE),
                             max_in_flight_samples_per_worker=4, rate_limiter_timeout_ms=300, **credentials)
    assert _actions(explicit) == list(range(12, 20))

    # Without the credentials the same dataset is refused, not silently empty.
    helpers.write_steps(server.localhost_client(), "queue", range(3))
    bare = ReplayDataset(address, "queue", dtypes=tf.nest.map_structure(lambda s: s.dtype, helpers.STEP_SIGNATURE),
                         shapes=tf.nest.map_structure(lambda s: s.shape, helpers.STEP_SIGNATURE),
                         max_in_flight_samples_per_worker=4, rate_limiter_timeout_ms=300)
    expected = errors.UnauthenticatedError if security == "token" else errors.UnavailableError
    words = "access token" if security == "token" else "unavailable"
    with pytest.raises(tf.errors.OpError, match=words):
        _actions(bare)
    with pytest.raises(expected):
        ReplayDataset.from_table_signature(address, "queue", max_in_flight_samples_per_worker=4,
                                           get_signature_timeout_secs=5)


def test_sharded_dataset_and_client_carry_token_and_tls_to_every_server(servers, helpers, tls_pair):
    certificate, key = tls_pair
    shards = [servers(helpers, token=TOKEN, tls_certificate=certificate, tls_private_key=key)
              for _ in range(2)]
    addresses = [f"localhost:{s.port}" for s in shards]
    helpers.write_steps(shards[0].localhost_client(), "queue", range(0, 5))
    helpers.write_steps(shards[1].localhost_client(), "queue", range(5, 10))

    dataset = ReplayDataset.from_table_signature(addresses, "queue", max_in_flight_samples_per_worker=4,
                                                 rate_limiter_timeout_ms=300, token=TOKEN,
                                                 root_certificates=certificate)
    assert _actions(dataset) == list(range(10))
    assert not dataset.replay_metrics.failed_servers

    # connect() given several addresses (a list or one string), and their pickled copies.
    for client in (connect(addresses, token=TOKEN, root_certificates=certificate),
                   connect(",".join(addresses), token=TOKEN, root_certificates=certificate)):
        assert isinstance(client, ShardedClient)
        for copy in (client, pickle.loads(pickle.dumps(client))):
            assert copy.insert(helpers.make_step(99), {"queue": 1.0}) in addresses
            assert set(copy.server_info()) == set(addresses)
    assert sum(s.tables["queue"].size for s in shards) == 4
