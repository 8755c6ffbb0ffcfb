"""TLS options and bearer tokens: where they are read from, what is refused, that a token is never shown."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest

from laredo_client import BearerToken, ClientOptions, LaredoClient, TlsOptions
from laredo_client.credentials import call_metadata, parse_address
from laredo_kernel.errors import ConfigError
from libs.client.tests.tls_files import TlsFiles, write_tls_files

SECRET = "s3cr3t-T0ken.value_42"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


def test_tls_options_read_pem_files(tls_files: TlsFiles) -> None:
    tls = TlsOptions.from_files(ca=tls_files.ca, cert=tls_files.client_cert, key=tls_files.client_key,
                                server_name="oam.internal")
    assert tls.ca == tls_files.ca.read_bytes() and tls.mutual
    assert tls.channel_options() == (("grpc.ssl_target_name_override", "oam.internal"),)
    assert tls.channel_credentials() is not None
    assert "PRIVATE KEY" not in repr(tls), "the private key is not shown"


def test_tls_options_name_every_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        TlsOptions.from_files(ca=tmp_path / "ca.pem", cert=tmp_path / "c.pem", key=tmp_path / "k.pem")
    text = str(raised.value)
    assert all(f"tls.{name}: cannot read" in text for name in ("ca", "cert", "key")), text
    assert str(tmp_path / "ca.pem") in text


def test_tls_options_need_pem_and_a_key_with_a_certificate(tls_files: TlsFiles) -> None:
    with pytest.raises(ConfigError, match="give both cert and key"):
        TlsOptions.from_files(cert=tls_files.client_cert)
    with pytest.raises(ConfigError, match=r"tls\.ca: expected PEM"):
        TlsOptions(ca=b"not a certificate")


@pytest.mark.parametrize(("address", "host_port", "https"), [
    ("fanout:4002", "fanout:4002", False),
    ("http://fanout:4002/", "fanout:4002", False),
    ("grpc://fanout:4002", "fanout:4002", False),
    ("https://fanout.example.com:443", "fanout.example.com:443", True),
    ("HTTPS://fanout:4002/", "fanout:4002", True),
])
def test_addresses_with_and_without_a_scheme(address: str, host_port: str, https: bool) -> None:
    target = parse_address(address)
    assert (target.host_port, target.https) == (host_port, https)


def test_an_https_address_means_tls_with_the_systems_roots() -> None:
    assert ClientOptions("https://fanout:4002", "public", "t").effective_tls == TlsOptions()
    assert ClientOptions("fanout:4002", "public", "t").effective_tls is None
    assert not ClientOptions("fanout:4002", "public", "t").encrypted


def test_tls_contradicting_the_address_or_channel_credentials_is_refused() -> None:
    with pytest.raises(ConfigError, match="names a cleartext scheme"):
        ClientOptions("http://fanout:4002", "public", "t", tls=TlsOptions())
    with pytest.raises(ConfigError, match="either tls or channel_credentials"):
        ClientOptions("fanout:4002", "public", "t", tls=TlsOptions(),
                      channel_credentials=grpc.ssl_channel_credentials())


def test_a_token_given_directly_is_sent_as_a_bearer_header_and_never_shown() -> None:
    token = BearerToken.of(f"  {SECRET}\n")
    assert call_metadata(token) == (("authorization", f"Bearer {SECRET}"),)
    assert call_metadata(None) == ()
    assert SECRET not in repr(token) and SECRET not in str(token)
    client = LaredoClient("https://fanout:4002", "public", "t", token=SECRET)
    assert SECRET not in repr(client.options), "options (logged, shown in errors) do not show the token"


def test_a_token_from_the_environment() -> None:
    token = BearerToken.from_env("MY_TOKEN", {"MY_TOKEN": SECRET})
    assert token.value() == SECRET and "MY_TOKEN" in repr(token)
    with pytest.raises(ConfigError, match="MY_TOKEN is not set"):
        BearerToken.from_env("MY_TOKEN", {})


def test_a_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    token = BearerToken.from_file(path)
    assert token.value() == SECRET
    path.write_text("rotated-token\n")
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)  # a new modification time, even on coarse clocks
    assert token.value() == "rotated-token"
    path.write_text("")
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)
    assert token.value() == "rotated-token", "an emptied file keeps the last good token"


def test_a_missing_token_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the token file .*nope"):
        BearerToken.from_file(tmp_path / "nope")


@pytest.mark.parametrize(("value", "problem"), [
    ("", "is empty"),
    ("  \n", "is empty"),
    (f"Bearer {SECRET}", "without the 'Bearer ' prefix"),
    (f"{SECRET} more", "visible ASCII without spaces"),
    (f"{SECRET}\u00e9", "visible ASCII without spaces"),
])
def test_bad_tokens_are_refused_without_repeating_them(value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        BearerToken.of(value)
    if value.strip():
        assert SECRET not in str(raised.value)


def test_a_token_without_tls_is_sent_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    LaredoClient("fanout:4002", "public", "t", token=SECRET)
    assert "without TLS" in caplog.text and SECRET not in caplog.text
    caplog.clear()
    LaredoClient("https://fanout:4002", "public", "t", token=SECRET)
    assert "without TLS" not in caplog.text
