"""TLS and shared-token authentication, in-process and through `replay-server`."""
import subprocess

import numpy as np
import pytest

from replay import errors
from replay.client import Client
from replay.server import Server
from tests.replay.server.conftest import make_tables

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for localhost (made with the openssl command)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def test_token_is_required_on_every_call():
    with Server(make_tables(), token="s3cret") as server:
        good = server.localhost_client()
        good.insert(np.float32(1), {"uniform": 1.0})
        assert good.server_info()["uniform"].current_size == 1
        for client in (Client(f"localhost:{server.port}"), Client(f"localhost:{server.port}", token="wrong")):
            with pytest.raises(errors.UnauthenticatedError, match="token"):
                client.server_info()
            with pytest.raises(errors.UnauthenticatedError):
                next(client.sample("uniform", 1, timeout=5, emit_timesteps=False, unpack_as_table_signature=True))
            with pytest.raises(errors.UnauthenticatedError):
                client.insert(np.float32(2), {"uniform": 1.0}, timeout=10)
        assert good.server_info()["uniform"].current_size == 1


def test_tls_with_token(certificate):
    cert, key = certificate
    with Server(make_tables(), token="t", tls_certificate=cert.read_bytes(),
                tls_private_key=key.read_bytes()) as server:
        client = server.localhost_client()
        client.insert(np.float32(3), {"uniform": 1.0})
        assert next(client.sample("uniform", 1, timeout=10,
                                  emit_timesteps=False, unpack_as_table_signature=True)).data[0] == 3
        plaintext = Client(f"localhost:{server.port}", token="t")
        with pytest.raises(errors.UnavailableError):
            plaintext.server_info()  # (with a timeout it would keep trying until then)


def test_replay_server_command_with_tls_and_token_file(tmp_path, certificate, tables_yaml,
                                                       server_process_factory):
    cert, key = certificate
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    process = server_process_factory(tables_yaml, "--tls-cert", cert, "--tls-key", key,
                                     "--token-file", token_file)
    assert "(TLS)" in process.lines[-1] and "token required" in process.lines[-1]
    client = Client(process.address, token="from-a-file", root_certificates=cert.read_bytes())
    client.insert(np.float32(1), {"uniform": 1.0})
    assert client.server_info()["uniform"].current_size == 1
    with pytest.raises(errors.UnauthenticatedError):
        Client(process.address, token="nope", root_certificates=cert.read_bytes()).server_info()
    process.terminate()
    code, err = process.read_until_exit()
    assert code == 0, err
