"""Severity curves (issue 14, item 3) on fault rows with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anpred.evaluation.campaign import ModelResult
from anpred.evaluation.curves import (
    ANPRED,
    false_alarms,
    half_detection_table,
    mild_to_severe,
    severity_curves,
    severity_plot,
)
from anpred.store.summary import Summary

GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run" / "summary.json"


def _row(kind: str, severity: float, anpred: bool, dmad: bool, stage: str = "s") -> dict:
    return {
        "model": "m",
        "kind": kind,
        "severity": severity,
        "stage": stage,
        "anpred_detected": anpred,
        "baseline:cradle_dmad": dmad,
    }


def _rows() -> list[dict]:
    # mantissa: anpred detects 2 of 2 at 18 bits and below, 1 of 2 at 20, none at 22;
    # D_MAD only from 14 bits. bf16 scale: both detect from 0.1.
    table = {22: (0, 0), 20: (1, 0), 18: (2, 0), 14: (2, 2), 7: (2, 2)}
    rows = []
    for bits, (a, d) in table.items():
        rows += [_row("mantissa", bits, i < a, i < d, f"s{i}") for i in range(2)]
    for scale, hit in ((0.01, False), (0.1, True), (1, True)):
        rows += [_row("bf16", scale, hit, hit)]
    return rows


def test_severities_run_from_mild_to_severe():
    assert mild_to_severe("mantissa", [7, 22, 18, 18]) == [22, 18, 7]
    assert mild_to_severe("bf16", [1, 0.01, 0.1]) == [0.01, 0.1, 1]


def test_half_detection_is_the_mildest_severity_reaching_half():
    curves = {(c.kind, c.method): c for c in severity_curves(_rows())}
    anpred, dmad = curves[("mantissa", ANPRED)], curves[("mantissa", "cradle_dmad")]
    assert anpred.severities == (22, 20, 18, 14, 7)
    assert anpred.detected == (0, 1, 2, 2, 2) and anpred.faults == (2,) * 5
    assert anpred.half_detection == 20  # 1 of 2 is half
    assert dmad.half_detection == 14
    assert curves[("bf16", ANPRED)].half_detection == pytest.approx(0.1)
    assert anpred.false_alarm is None  # no clean run given


def test_a_method_that_never_reaches_half_says_never():
    rows = [
        _row("mantissa", 18, False, False),
        _row("mantissa", 16, True, False),
        _row("mantissa", 16, False, False),
        _row("mantissa", 16, False, False),
    ]
    curves = {c.method: c for c in severity_curves(rows)}
    assert curves["cradle_dmad"].half_detection is None
    assert curves[ANPRED].half_detection is None  # 1 of 3 at 16 bits
    table = half_detection_table(severity_curves(rows))
    assert "| never |" in table and "0/1 1/3" in table


def test_false_alarms_count_clean_participant_input_pairs():
    clean = Summary.from_dict(json.loads(GOLDEN.read_text()))
    rates = false_alarms(ModelResult("m", clean))
    judged = [p.participant for p in clean.participants if p.judged]
    flagged = {(f.participant, f.input) for f in clean.findings}
    assert rates[ANPRED] == pytest.approx(len(flagged) / (len(judged) * len(clean.inputs)))
    assert 0 < rates[ANPRED] < 1  # the golden run has a faulty participant: real findings
    assert set(rates) == {ANPRED, *clean.baselines}
    assert all(0 <= r <= 1 for r in rates.values())


def test_the_plot_is_written(tmp_path):
    path = severity_plot(severity_curves(_rows()), tmp_path / "plots" / "severity.png")
    assert path is not None and path.stat().st_size > 1000
    assert severity_plot([], tmp_path / "none.png") is None
