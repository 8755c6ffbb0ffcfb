"""The client certificate the front door saw, from its `x-forwarded-client-cert` header (pure).

Envoy sets the header (SANITIZE_SET) only when the listener has a client CA and the client presented a
certificate that chains to it; a header a client sends itself is dropped at the door. Format: elements
separated by ",", each "Key=value" pairs separated by ";", values double-quoted when they hold , ; = or ",
e.g. `Hash=ab12…;Subject="CN=ops-client,O=Example";URI=spiffe://example.org/ops;DNS=ops.example.org`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = "x-forwarded-client-cert"
#: An attribute of a distinguished name: up to an unescaped "," or "+" (a backslash escapes the next character).
_ATTRIBUTE = re.compile(r"(?:[^,+\\]|\\.)+", re.DOTALL)
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    subject: str = ""
    common_name: str = ""
    uris: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.subject or (self.uris[0] if self.uris else self.dns_names[0] if self.dns_names else "unnamed")


def _split(text: str, separator: str) -> list[str]:
    """Split on `separator` outside double quotes; backslash escapes the next character inside quotes."""
    parts, current, quoted, escaped = [], [], False, False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\" and quoted:
            current.append(char)
            escaped = True
        elif char == '"':
            quoted = not quoted
            current.append(char)
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unquote(value: str) -> str:
    """A value without its quotes; Envoy escapes only the double quote inside them (RFC 2253 escapes stay)."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"')
    return value


def common_name(subject: str) -> str:
    """The CN of an RFC 2253 distinguished name ("CN=ops,O=Example"); "" when it has none."""
    for attribute in _ATTRIBUTE.findall(subject):
        key, sep, value = _ESCAPED.sub(r"\1", attribute).partition("=")
        if sep and key.strip().upper() in ("CN", "COMMONNAME", "2.5.4.3"):
            return value.strip()
    return ""


def parse_client_certificate(header: str) -> ClientCertificate | None:
    """The certificate of the last element (the one our door added); None for an empty header."""
    elements = [e for e in _split(header, ",") if e.strip()]
    if not elements:
        return None
    subject, uris, dns = "", [], []
    for pair in _split(elements[-1], ";"):
        key, sep, value = pair.partition("=")
        if not sep:
            continue
        key, value = key.strip().lower(), _unquote(value)
        if key == "subject":
            subject = value
        elif key == "uri" and value:
            uris.append(value)
        elif key == "dns" and value:
            dns.append(value)
    if not (subject or uris or dns):
        return None
    return ClientCertificate(subject, common_name(subject), tuple(uris), tuple(dns))
