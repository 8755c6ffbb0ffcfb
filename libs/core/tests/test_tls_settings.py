"""TLS settings of the services' own connections (`stream.tls`, `redis.tls`, a snapshot store's `ca_file`): every
problem names its key, and what the settings hand to the clients."""

from __future__ import annotations

import pickle
import ssl
from pathlib import Path

import pytest
import trustme

from laredo_core.config import LaredoSettings, load_settings
from laredo_core.config.reader import Reader
from laredo_kernel.errors import ConfigError
from laredo_core.frontdoor.settings import TlsSettings
from laredo_core.snapshots.config import read_store_config
from laredo_core.stream.nats_servers import NatsServers
from laredo_core.tls import ClientTls, client_ssl_context, server_ssl_context


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """ca, cert and key files of a test CA, another certificate's key, and a file that holds no PEM."""
    directory = tmp_path_factory.mktemp("pem")
    ca = trustme.CA()
    issued, other = ca.issue_cert("localhost"), ca.issue_cert("other")
    files = {name: str(directory / f"{name}.pem") for name in ("ca", "cert", "key", "other_key", "garbage")}
    ca.cert_pem.write_to_path(files["ca"])
    issued.cert_chain_pems[0].write_to_path(files["cert"])
    issued.private_key_pem.write_to_path(files["key"])
    other.private_key_pem.write_to_path(files["other_key"])
    Path(files["garbage"]).write_text("not a certificate\n")
    return files


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "laredo.conf"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, env={})
    return caught.value.problems


def settings_of(tmp_path: Path, text: str) -> LaredoSettings:
    path = tmp_path / "laredo.conf"
    path.write_text(text)
    return load_settings(path, env={})


@pytest.mark.parametrize("section", ["stream", "redis"])
@pytest.mark.parametrize(("tls", "expected"), [
    ('ca = "/nonexistent/ca.pem"', ["{s}.tls.ca: no file at '/nonexistent/ca.pem'"]),
    ('cert = "{cert}"', ["{s}.tls.key: cert and key go together: set both (the PEM files of the client "
                         "certificate) or neither"]),
    ('key = "{key}"', ["{s}.tls.cert: cert and key go together: set both (the PEM files of the client "
                       "certificate) or neither"]),
    ('ca = "{garbage}"', ["{s}.tls.ca: cannot load the CA certificates from '{garbage}'"]),
    ('cert = "{cert}", key = "{other_key}"', ["{s}.tls.cert: cannot use the certificate '{cert}' with the key "
                                              "'{other_key}'"]),
    ("cafile = x", ["{s}.tls.cafile: unknown key"]),
], ids=["missing file", "cert without key", "key without cert", "not PEM", "key of another cert", "typo"])
def test_a_client_tls_problem_names_its_key(tmp_path: Path, pem: dict[str, str], section: str, tls: str,
                                            expected: list[str]) -> None:
    url = 'url = "rediss://127.0.0.1:6380/0", ' if section == "redis" else ""
    problems = problems_of(tmp_path, f"{section} {{ {url}tls {{ {tls.format(**pem)} }} }}")
    wanted = [e.format(s=section, **pem) for e in expected]
    assert len(problems) == len(wanted)
    assert all(p.startswith(w) for p, w in zip(problems, wanted)), problems


def test_redis_tls_needs_a_rediss_url(tmp_path: Path, pem: dict[str, str]) -> None:
    problems = problems_of(tmp_path, f'redis {{ url = "redis://r:6379/0", tls {{ ca = "{pem["ca"]}" }} }}')
    assert problems == ["redis.tls: TLS needs a rediss:// URL; redis.url is redis://"]


def test_redis_tls_files_reach_the_client_as_url_parameters(tmp_path: Path, pem: dict[str, str]) -> None:
    settings = settings_of(tmp_path, f"""redis {{ url = "rediss://r:6380/0",
        tls {{ ca = "{pem["ca"]}", cert = "{pem["cert"]}", key = "{pem["key"]}" }} }}""")
    from redis.asyncio.connection import parse_url

    assert parse_url(settings.redis.url) | {"connection_class": None} == {
        "host": "r", "port": 6380, "db": 0, "connection_class": None, "ssl_ca_certs": pem["ca"],
        "ssl_certfile": pem["cert"], "ssl_keyfile": pem["key"]}
    assert settings.redis.tls == ClientTls(pem["ca"], pem["cert"], pem["key"])
    assert settings_of(tmp_path, 'redis { url = "rediss://r:6380/0" }').redis.url == "rediss://r:6380/0"


def test_nats_servers_carry_tls_and_credentials(tmp_path: Path, pem: dict[str, str]) -> None:
    settings = settings_of(tmp_path, f"""stream {{ nats_url = "tls://n1:4222,tls://n2:4222", user = app,
        password = "s3cret-pw", tls {{ ca = "{pem["ca"]}", cert = "{pem["cert"]}", key = "{pem["key"]}" }} }}""")
    servers = settings.stream.nats_urls
    assert servers == ("tls://n1:4222", "tls://n2:4222")  # still the URLs, as a tuple
    assert (servers.user, servers.password, servers.tls.ca) == ("app", "s3cret-pw", pem["ca"])
    assert pickle.loads(pickle.dumps(servers)) == servers  # Spark tasks carry it whole
    assert servers != NatsServers(servers)  # the same URLs without TLS and credentials
    assert "s3cret-pw" not in repr(servers)
    with pytest.raises(AttributeError):
        servers.token = "x"  # type: ignore[misc]


@pytest.mark.parametrize(("text", "expected"), [
    ("password = pw", "stream.password: set user too (user and password go together)"),
    ("user = a, password = pw, token = t", "stream.token: set either token or user and password, not both"),
])
def test_nats_credentials_problems(tmp_path: Path, text: str, expected: str) -> None:
    assert problems_of(tmp_path, f"stream {{ {text} }}") == [expected]


def test_client_context_verifies_the_server_against_the_ca(pem: dict[str, str]) -> None:
    context = client_ssl_context(ClientTls(ca=pem["ca"]))
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert [c["subject"] for c in context.get_ca_certs()] and len(context.get_ca_certs()) == 1


@pytest.mark.parametrize(("client_ca", "required", "mode"), [
    (False, False, ssl.CERT_NONE), (True, False, ssl.CERT_OPTIONAL), (True, True, ssl.CERT_REQUIRED)])
def test_listener_context_asks_for_client_certificates_as_configured(pem: dict[str, str], client_ca: bool,
                                                                     required: bool, mode: ssl.VerifyMode) -> None:
    tls = TlsSettings(pem["cert"], pem["key"], pem["ca"] if client_ca else "", required)
    assert server_ssl_context(tls).verify_mode == mode


def test_listener_context_names_the_key_of_an_unusable_certificate(pem: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"tls\.cert: cannot use the certificate"):
        server_ssl_context(TlsSettings(pem["cert"], pem["other_key"]))


@pytest.mark.parametrize(("config", "expected"), [
    ({"ca_file": "/nonexistent/ca.pem"}, "store_config.ca_file: no file at '/nonexistent/ca.pem'"),
    ({"ca_file": "{ca}", "secure": False}, "store_config.ca_file: verifies a TLS endpoint: set secure = true"),
    ({"ca_file": "{ca}", "endpoint": "http://s3:9000"}, "store_config.ca_file: verifies a TLS endpoint"),
])
def test_s3_ca_file_problems(pem: dict[str, str], config: dict[str, object], expected: str) -> None:
    problems: list[str] = []
    values = {k: v.format(**pem) if isinstance(v, str) else v for k, v in config.items()}
    read_store_config("s3", Reader({"endpoint": "s3:9000", "bucket": "b", **values}, "store_config", problems))
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_s3_ca_file_is_kept(pem: dict[str, str]) -> None:
    problems: list[str] = []
    config = read_store_config("s3", Reader({"endpoint": "https://s3:9000", "bucket": "b", "ca_file": pem["ca"]},
                                            "store_config", problems))
    assert not problems and (config.secure, config.ca_file) == (True, pem["ca"])
