"""A trainer reading and writing through an external replay server that needs a token and TLS:
the credentials reach the driver's client, the rollout workers' writers (Ray actors) and the
learner's ReplayDataset."""
import pytest

from replay import errors as replay_errors
from replay.server import Server
from replay.table import Table
from tests.replay.tls import self_signed_certificate
from tfrl import errors
from tfrl.agents.pg.pg import PGTrainer
from tfrl.agents.pg.pg_policy import PGTFPolicy
from tfrl.rollout import RolloutWorker, replay_signature
from tfrl.optimizers.sync_samples_optimizer import ROLLOUTS_TABLE
from tfrl.replay_hosting import ReplayService

TOKEN = "trainer-token"


@pytest.fixture
def secure_replay_server(tmp_path):
    """(server, config keys reaching it): a TLS server with a token and the PG rollouts table."""
    certificate, key = self_signed_certificate()
    signature = replay_signature(RolloutWorker("CartPole-v1", PGTFPolicy, {}).get_policy())
    server = Server([Table.queue(ROLLOUTS_TABLE, 20_000, signature=signature)], token=TOKEN,
                    tls_certificate=certificate, tls_private_key=key)
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "cert.pem").write_bytes(certificate)
    keys = {"replay_address": f"localhost:{server.port}", "replay_token_file": str(tmp_path / "token"),
            "replay_root_certificates": str(tmp_path / "cert.pem")}
    yield server, keys
    server.stop(grace=0)


@pytest.mark.timeout(240)
def test_trainer_trains_through_an_external_server_with_token_and_tls(ray_session, small_config,
                                                                      secure_replay_server):
    server, keys = secure_replay_server
    trainer = PGTrainer(config=dict(small_config("PG"), **keys), env="CartPole-v1")
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert result["info"]["num_steps_trained"] > 0
    info = server.tables[ROLLOUTS_TABLE].info()
    assert info.num_inserts >= 40 and info.num_samples >= 40  # written by the workers, read by the learner


def test_replay_service_needs_the_credentials_and_refuses_roots_without_a_tls_server(
        secure_replay_server, tmp_path):
    server, keys = secure_replay_server
    with_credentials = ReplayService(keys)
    assert with_credentials.start() == keys["replay_address"]
    assert ROLLOUTS_TABLE in with_credentials.client().server_info()
    assert set(with_credentials.client_kwargs) == {"token", "root_certificates"}
    with pytest.raises(replay_errors.UnavailableError):  # no TLS: the handshake fails
        ReplayService({"replay_address": keys["replay_address"]}).client().server_info(timeout=5)
    without_token = dict(keys, replay_token_file=None)
    with pytest.raises(replay_errors.UnauthenticatedError):
        ReplayService(without_token).start()
    # a server the trainer starts serves plaintext unless given a certificate and key to serve
    with pytest.raises(errors.InvalidConfigError, match="replay_tls_certificate_file"):
        ReplayService({"replay_root_certificates": keys["replay_root_certificates"]})
    with pytest.raises(errors.InvalidConfigError, match="replay_root_certificates"):
        ReplayService(dict(keys, replay_root_certificates=str(tmp_path / "missing.pem")))
