"""Scoring a run against its injected fault reads the typed summary; a broken one fails."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from anpred.errors import UsageError
from anpred.evaluation.scoring import detection, fault_outcome, fault_row, score_injection
from anpred.inject.spec import FaultSpec
from anpred.store.summary import Summary

#: A real ``anpred inject`` run (onnxruntime with a bf16 fault at s2) and its ground truth.
GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run"
FAULTY = "onnxruntime!bf16@s2"


@pytest.fixture
def raw() -> dict[str, Any]:
    return json.loads((GOLDEN / "summary.json").read_text())


@pytest.fixture
def truth() -> dict[str, Any]:
    return json.loads((GOLDEN / "ground_truth.json").read_text())


def test_detection_gives_what_ground_truth_json_recorded(
    raw: dict[str, Any], truth: dict[str, Any]
) -> None:
    summary = Summary.from_dict(raw)
    assert detection(summary, FAULTY, "s2") == truth["detected"]
    record = {k: v for k, v in truth.items() if k not in ("detected", "exit_code")}
    assert score_injection(record, summary, truth["exit_code"]) == truth


def test_fault_row_scores_every_method(raw: dict[str, Any]) -> None:
    summary = Summary.from_dict(raw)
    clean = copy.deepcopy(raw)
    # the clean onnxruntime: passed every baseline but D_MAD on bus (fp32 noise)
    for name, per in clean["baselines"].items():
        per["onnxruntime"] = {"passed": name != "cradle_dmad", "failed_inputs": []}
    clean["baselines"]["cradle_dmad"]["onnxruntime"]["failed_inputs"] = summary.input_ids
    spec = FaultSpec.from_dict({"stage": "s2", "op": "Conv", "kind": "bf16", "severity": 1.0})
    row = fault_row(summary, Summary.from_dict(clean), "tiny", "onnxruntime", FAULTY, spec)
    assert row["anpred_detected"] and row["anpred_flagged_at_stage"]
    assert row["isolation_top1"] and row["library_blamed"] and row["emergence_at_stage"] == 1.0
    assert row["other_flagged"] == []
    assert row["stage_rel_l2_vs_fp64"] == raw["deviation"]["vs_fp64"][FAULTY]["s2"]
    assert row["baseline:polygraphy_allclose"] and row["baseline:max_abs_1e-5"]
    assert not row["baseline:max_abs_1e-3"]  # it passed the faulty participant
    assert not row["baseline:cradle_dmad"]  # it failed the clean one on the same inputs
    flagging = sum(bool(v) for k, v in row.items() if k.startswith("baseline:"))
    assert fault_outcome(row) == (
        "detected (flagged at its stage yes, isolation top-1 yes, library blamed yes); "
        f"{flagging}/6 baselines flag it"
    )
    missed = {**row, "anpred_detected": False, "baseline:polygraphy_allclose": False}
    assert fault_outcome(missed) == f"missed by anpred; {flagging - 1}/6 baselines flag it"


@pytest.mark.parametrize(
    ("rename", "message"),
    [
        (lambda s: s.update(finding=s.pop("findings")), "findings is missing"),
        (
            lambda s: s["findings"][0].update(who=s["findings"][0].pop("participant")),
            r"findings\[0\].participant is missing",
        ),
        (
            lambda s: s["localization"]["blame"].update(
                sole=s["localization"]["blame"].pop("sole_counts")
            ),
            "localization.blame.sole_counts is missing",
        ),
        (
            lambda s: s["deviation"].update(fp64=s["deviation"].pop("vs_fp64")),
            "deviation.vs_fp64 is missing",
        ),
    ],
)
def test_a_renamed_key_fails_loading_instead_of_counting_the_fault_undetected(
    raw: dict[str, Any], rename: Any, message: str
) -> None:
    rename(raw)
    with pytest.raises(UsageError, match=message):
        Summary.from_dict(raw)
