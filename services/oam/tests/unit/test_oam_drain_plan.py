"""plan_drain: which fan-out instances a drain addresses, and when it is refused for leaving a table unserved."""

from __future__ import annotations

from typing import Any

import pytest
from laredo_kernel.changes import TableId
from laredo_core.coordination.ports import InstanceStatus

from laredo_oam.domain.drain import DrainPlan, plan_drain
from laredo_oam.domain.errors import NotFound, PreconditionFailed

USERS, ORDERS = TableId("public", "users"), TableId("public", "orders")


def fanout(instance_id: str, **tables: dict[str, Any]) -> InstanceStatus:
    return InstanceStatus("fanout", instance_id, {"tables": {f"public.{t}": entry for t, entry in tables.items()}})


READY: dict[str, Any] = {"ready": True}
BASELINING: dict[str, Any] = {"ready": False}
DRAINING: dict[str, Any] = {"ready": True, "draining": "admin"}
TWO_READY = [fanout("f1", users=READY, orders=READY), fanout("f2", users=READY)]


@pytest.mark.parametrize(("fanouts", "table", "instance", "force", "expected"), [
    # One named instance of two ready ones drains; the other keeps every table it shares.
    (TWO_READY, USERS, "f2", False, DrainPlan(("f2",))),
    (TWO_READY, None, "f2", False, DrainPlan(("f2",))),
    # An instance that is the only one ready for a table drains only when forced, and says which.
    (TWO_READY, None, "f1", True, DrainPlan(("f1",), ("public.orders",))),
    (TWO_READY, USERS, "", True, DrainPlan(("f1", "f2"), ("public.users",))),
    # Instances still baselining or already draining are no refuge, but losing nothing ready is no refusal.
    ([fanout("f1", users=READY), fanout("f2", users=DRAINING)], USERS, "f1", True,
     DrainPlan(("f1",), ("public.users",))),
    ([fanout("f1", users=BASELINING), fanout("f2", users=BASELINING)], None, "", False, DrainPlan(("f1", "f2"))),
    ([fanout("f1", users=READY), fanout("f2", users=BASELINING)], USERS, "f2", False, DrainPlan(("f2",))),
    # Without an instance: every instance serving the table (here only f1 serves orders, and it is ready).
    ([fanout("f1", orders=BASELINING), fanout("f2", users=READY)], ORDERS, "", False, DrainPlan(("f1",))),
])
def test_plans(fanouts: list[InstanceStatus], table: TableId | None, instance: str, force: bool,
               expected: DrainPlan) -> None:
    assert plan_drain(fanouts, table, instance, force=force) == expected


def test_the_last_ready_instance_of_a_table_is_refused_with_what_to_do() -> None:
    with pytest.raises(PreconditionFailed) as refused:
        plan_drain(TWO_READY, None, "f1", force=False)
    message = str(refused.value)
    assert "fan-out instance f1 would leave no ready fan-out instance for public.orders (ready: f1)" in message
    assert "Start another instance" in message and "--force" in message
    with pytest.raises(PreconditionFailed) as everyone:
        plan_drain(TWO_READY, USERS, "", force=False)
    message = str(everyone.value)
    assert "drains every fan-out instance serving the table(s) (f1, f2)" in message
    assert "public.users (ready: f1, f2)" in message and "laredo drain --instance ID" in message


def test_unknown_instances_and_tables_they_do_not_serve_are_not_found() -> None:
    with pytest.raises(NotFound, match=r"fan-out instance 'f9' is not running .*running fan-out instances: f1, f2"):
        plan_drain(TWO_READY, None, "f9", force=True)
    with pytest.raises(NotFound, match=r"'f2' does not serve public.orders; instances serving it: f1"):
        plan_drain(TWO_READY, ORDERS, "f2", force=True)
