"""The generated code in libs/proto is exactly what scripts/gen-protos makes from proto/."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_reproducible_from_proto(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    subprocess.run(["bash", str(ROOT / "scripts/gen-protos")], check=True, env=env, capture_output=True)
    committed, fresh = ROOT / "libs/proto/laredo", tmp_path / "laredo"
    differences = _differences(filecmp.dircmp(committed, fresh, ignore=["__pycache__"]))
    assert not differences, f"libs/proto differs from a fresh scripts/gen-protos run: {differences}; rerun it"


def _differences(cmp: filecmp.dircmp) -> list[str]:
    found = [*cmp.left_only, *cmp.right_only, *cmp.diff_files]
    for sub in cmp.subdirs.values():
        found.extend(_differences(sub))
    return found


def test_services_answer_under_spec_and_upstream_names() -> None:
    from laredo.replication.v1 import replication_pb2
    from laredo.v1 import oam_pb2, query_pb2

    names = {s.full_name: [m.name for m in s.methods]
             for module in (replication_pb2, oam_pb2, query_pb2) for s in module.DESCRIPTOR.services_by_name.values()}
    for spec, upstream in (("laredo.replication.v1.TableSyncReplication", "laredo.replication.v1.LaredoReplicationService"),
                           ("laredo.v1.TableSyncOAM", "laredo.v1.LaredoOAMService"),
                           ("laredo.v1.TableSyncQuery", "laredo.v1.LaredoQueryService")):
        assert names[spec] == names[upstream] and names[spec]
    extensions = ["ListInstances"]  # Laredo's own, after the specification's 26
    assert len(names["laredo.v1.TableSyncOAM"]) == 26 + len(extensions)
    assert names["laredo.v1.TableSyncOAM"][26:] == extensions
