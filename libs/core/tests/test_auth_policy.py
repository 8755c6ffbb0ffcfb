"""Identities against rules: roles (admin implies read), tables (a limited credential names its tables)."""

from __future__ import annotations

import pytest

from laredo_core.auth.identity import Identity, Role, parse_table_pattern, table_name
from laredo_core.auth.policy import RefusalKind, check_role, check_tables
from laredo_core.auth.rules import MethodRule

OPS = Identity("ops", Role.ADMIN)
APP = Identity("app", Role.READ, frozenset({"public.orders", "audit.*"}))
NO_ROLE = Identity("jwt:x", None, kind="jwt")
PAUSE = "/laredo.v1.TableSyncOAM/PauseSync"


@pytest.mark.parametrize("identity, needed, allowed", [
    (OPS, Role.ADMIN, True), (OPS, Role.READ, True), (APP, Role.READ, True), (APP, Role.ADMIN, False),
    (NO_ROLE, Role.READ, False)])
def test_admin_implies_read(identity: Identity, needed: Role, allowed: bool) -> None:
    assert (check_role(identity, "/m", MethodRule(needed)) is None) is allowed


def test_a_refusal_names_the_credential_the_role_needed_and_the_rpc() -> None:
    refusal = check_role(APP, PAUSE, MethodRule(Role.ADMIN))
    assert refusal is not None and refusal.kind is RefusalKind.PERMISSION_DENIED and refusal.credential == "app"
    assert refusal.message == f"credential 'app' (role read) may not call {PAUSE}: it needs role admin"
    no_role = check_role(NO_ROLE, PAUSE, MethodRule(Role.READ))
    assert no_role is not None and "(no Laredo role)" in no_role.message


def test_a_method_without_a_rule_is_refused_to_everyone() -> None:
    refusal = check_role(OPS, "/x.Y/Z", None)
    assert refusal is not None and refusal.kind is RefusalKind.PERMISSION_DENIED
    assert "not covered by any access rule" in refusal.message


@pytest.mark.parametrize("tables, allowed", [
    ({"public.orders"}, True), ({"audit.log", "audit.other"}, True), ({"public.orders", "public.items"}, False),
    ({"public.items"}, False), (None, False), (set(), False)])
def test_a_limited_credential_touches_only_its_tables(tables: set[str] | None, allowed: bool) -> None:
    scope = frozenset(tables) if tables is not None else None
    assert (check_tables(APP, "/m", scope) is None) is allowed
    assert check_tables(OPS, "/m", scope) is None  # not limited


def test_table_refusals_say_what_to_change() -> None:
    outside = check_tables(APP, "/q/GetRow", frozenset({"public.orders", "public.items"}))
    assert outside is not None
    assert outside.message == "credential 'app' is limited to audit.*, public.orders; /q/GetRow names public.items"
    spanning = check_tables(APP, "/o/GetStatus", None)
    assert spanning is not None and "spans every table" in spanning.message


@pytest.mark.parametrize("schema, table, name", [("", "t", "public.t"), ("s", "t", "s.t"), ("", "s.t", "s.t"),
                                                 ("x", "s.t", "x.s.t")])
def test_table_names_as_the_services_read_them(schema: str, table: str, name: str) -> None:
    assert table_name(schema, table) == name


@pytest.mark.parametrize("text", ["", ".", "s.", ".t", "*"])
def test_bad_table_patterns(text: str) -> None:
    with pytest.raises(ValueError):
        parse_table_pattern(text)
