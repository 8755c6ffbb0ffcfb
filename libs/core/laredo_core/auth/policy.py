"""Whether an identity may make a call: its role against the method's, its tables against the request's (pure).

Refusals name the credential (never its secret), the role or tables needed and the RPC, so the caller and the
operator reading the log both know what to change.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from laredo_core.auth.identity import Identity
from laredo_core.auth.rules import MethodRule


#: Each kind is named as the gRPC status a refusal is answered with.
class RefusalKind(enum.Enum):
    UNAUTHENTICATED = "UNAUTHENTICATED"  # no credential, or one that does not verify
    PERMISSION_DENIED = "PERMISSION_DENIED"  # a known credential without the role or the tables


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: RefusalKind
    message: str
    credential: str = ""  # the credential's name; "" when the caller proved no identity


def unauthenticated(method: str, reason: str, *, certificates: bool, credential: str = "") -> Refusal:
    how = "send the header `authorization: Bearer <token>`"
    if certificates:
        how += " or connect with a client certificate listed in auth.mtls.identities"
    return Refusal(RefusalKind.UNAUTHENTICATED, f"{method} needs a credential ({reason}): {how}", credential)


def check_role(identity: Identity, method: str, rule: MethodRule | None) -> Refusal | None:
    if rule is None:
        return Refusal(RefusalKind.PERMISSION_DENIED, f"{method} is not covered by any access rule, so no "
                                                      "credential may call it", identity.name)
    if identity.may(rule.role):
        return None
    has = f"role {identity.role.label}" if identity.role is not None else "no Laredo role"
    return Refusal(RefusalKind.PERMISSION_DENIED, f"credential {identity.name!r} ({has}) may not call {method}: "
                                                  f"it needs role {rule.role.label}", identity.name)


def check_tables(identity: Identity, method: str, tables: frozenset[str] | None) -> Refusal | None:
    if identity.covers(tables):
        return None
    limited = f"credential {identity.name!r} is limited to {identity.describe_tables() or 'no table'}"
    if tables is None:
        message = (f"{limited}; {method} as called spans every table: name a table in the request, or use a "
                   "credential not limited to tables")
    else:
        message = f"{limited}; {method} names {', '.join(identity.outside(tables))}"
    return Refusal(RefusalKind.PERMISSION_DENIED, message, identity.name)
