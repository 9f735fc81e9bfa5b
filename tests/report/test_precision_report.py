"""The report names each participant's precision class and each class's floor (issue 35)."""

from __future__ import annotations

import json
from pathlib import Path

from anpred.report.plots import propagation_plot
from anpred.report.run_summary import RunSummary
from anpred.report.terminal import render_summary
from anpred.store.summary import Summary

GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run" / "summary.json"


def _mixed() -> dict:
    """The golden run's summary with jax declared bf16 and an ideal reference beside it."""
    data = json.loads(GOLDEN.read_text())
    anchors = [a["key"] for a in data["anchors"]]
    data["precision"] = {
        "participants": {
            "torch": {"format": "fp32", "scope": "all", "class": "fp32"},
            "jax": {"format": "bf16", "scope": "all", "class": "bf16"},
        },
        "classes": {
            "fp32": {"members": ["torch"], "reference": "torch", "factor": 10.0,
                     "floor": {a: 1e-7 for a in anchors}},
            "bf16": {"members": ["jax"], "reference": "torch[ideal-bf16]", "factor": 3.0,
                     "floor": {a: 4e-3 for a in anchors}},
        },
    }  # fmt: skip
    return data


def test_terminal_shows_classes_and_floors(tmp_path) -> None:
    text = render_summary(_mixed(), tmp_path)
    assert "precision     bf16: 1 (jax); vs torch[ideal-bf16] (ideal bf16 arithmetic), 3x" in text
    assert "floor at the output 4.0e-03" in text
    header = next(line for line in text.splitlines() if " status " in line)
    assert header.split()[1] == "class"
    row = next(line for line in text.splitlines() if line.startswith("jax "))
    assert row.split()[1] == "bf16"
    # an all-fp32 run keeps its table as it was
    plain = render_summary(json.loads(GOLDEN.read_text()), tmp_path)
    assert "precision " not in plain and " class " not in plain


def test_the_api_and_the_plot_read_the_classes() -> None:
    summary = Summary.from_dict(_mixed())
    assert summary.precision_class("jax") == "bf16"
    assert summary.precision_class("openvino") == "fp32"  # unrecorded: fp32
    assert Summary.from_dict(summary.to_dict()).precision == summary.precision
    png = propagation_plot(RunSummary(_mixed()))
    assert png is not None and png.startswith(b"\x89PNG")
