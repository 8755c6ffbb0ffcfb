"""The client certificate as the front door's x-forwarded-client-cert header describes it."""

from __future__ import annotations

import pytest

from laredo_core.auth.xfcc import ClientCertificate, common_name, parse_client_certificate


def test_envoys_header_with_subject_uri_and_dns() -> None:
    header = ('Hash=1f2e3d;Subject="CN=ops-client,OU=Testing cert #1,O=trustme";'
              'URI=spiffe://example.org/ops;DNS=ops.example.org;DNS=ops2.example.org')
    assert parse_client_certificate(header) == ClientCertificate(
        "CN=ops-client,OU=Testing cert #1,O=trustme", "ops-client", ("spiffe://example.org/ops",),
        ("ops.example.org", "ops2.example.org"))


def test_quoted_values_keep_their_separators_and_escapes() -> None:
    header = r'By=spiffe://door;Hash=aa;Subject="CN=a\,b,O=Ex \"Quoted\"";URI=;DNS=x'
    cert = parse_client_certificate(header)
    assert cert is not None
    assert cert.subject == r'CN=a\,b,O=Ex "Quoted"' and cert.common_name == "a,b"
    assert cert.uris == () and cert.dns_names == ("x",)


def test_the_last_element_is_the_one_our_door_added() -> None:
    header = 'Subject="CN=forged";DNS=forged,Hash=bb;Subject="CN=real"'
    cert = parse_client_certificate(header)
    assert cert is not None and cert.common_name == "real"


@pytest.mark.parametrize("header", ["", " ", "Hash=abc", "garbage", ",,"])
def test_headers_without_an_identity_give_none(header: str) -> None:
    assert parse_client_certificate(header) is None


@pytest.mark.parametrize("subject, cn", [("CN=a,O=b", "a"), ("O=b,CN=a", "a"), ("O=b", ""), ("cn=lower", "lower"),
                                         ("CN=x+UID=1", "x"), ("CN=a\\+b", "a+b"), ("", "")])
def test_common_name(subject: str, cn: str) -> None:
    assert common_name(subject) == cn
