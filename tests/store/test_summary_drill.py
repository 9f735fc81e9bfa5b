"""The drill-down's entry in ``summary.json``: optional, typed, round-trips, fails loudly."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from anpred.errors import UsageError
from anpred.store.drill import DrillStore
from anpred.store.summary import SCHEMA_VERSION, Summary
from anpred.store.summary_drill import DrillDown, DrillOp, DrillTarget

GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run" / "summary.json"


def drill_record() -> DrillDown:
    ops = (
        DrillOp("op0001", "/m/conv/Conv", "Conv", "m.conv", 2e-7, 1e-6, False, 2e-7, False),
        DrillOp("op0002", "/m/act/Sigmoid", "Sigmoid", "m.act", 4e-3, 1e-6, True, 4e-3, True),
        DrillOp("op0003", "/m/Mul", "Mul", None, None, None, False, 3e-3, True),
    )
    target = DrillTarget("onnxruntime!bf16@s2", "s2", ops, "op0002", "introduced")
    return DrillDown((target,), ("torch", "onnxruntime!bf16@s2", "jax"), {}, 12.5)


def test_a_summary_with_a_drill_down_round_trips() -> None:
    base = Summary.from_dict(json.loads(GOLDEN.read_text()))
    assert base.drill is None and "drill" not in base.to_dict()
    summary = replace(base, drill=drill_record())
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["schema_version"] == SCHEMA_VERSION
    loaded = Summary.from_dict(data)
    assert loaded == summary
    target = loaded.drill.target("onnxruntime!bf16@s2", "s2")
    assert target is not None and target.named_op.node == "/m/act/Sigmoid"
    assert loaded.drill.target("jax", "s2") is None


def test_an_ill_typed_drill_entry_is_a_one_line_error() -> None:
    data = Summary.from_dict(json.loads(GOLDEN.read_text())).to_dict()
    data["drill"] = drill_record().to_dict()
    del data["drill"]["targets"][0]["ops"][1]["op_type"]
    with pytest.raises(UsageError, match=r"drill.targets\[0\].ops\[1\].op_type is missing"):
        Summary.from_dict(data)


def test_the_drill_store_writes_its_record_under_the_run(tmp_path: Path) -> None:
    drill = DrillStore(tmp_path)
    assert not drill.has_record()
    drill.write_record(drill_record().to_dict())
    assert drill.has_record() and drill.root.parent == tmp_path
    assert DrillDown.from_dict(drill.read_record()) == drill_record()
    assert drill.run.root == drill.root
    drill.clear()
    assert not drill.root.exists()
