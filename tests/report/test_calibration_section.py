"""The oracle's noise rule in the report and the terminal: a calibration is a table
(anchor → factors) with its source, not one long dict; the fixed rule says so."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from anpred.report.html import render_html
from anpred.report.plots import RenderedPlots
from anpred.report.terminal import render_summary

CALIBRATION = {
    "false_alarm_per_cell": 0.001,
    "confidence": 0.9,
    "inputs": ["synthetic0", "synthetic1"],
    "participants": ["torch", "onnxruntime", "jax"],
    "factor": {"stem": 4.9, "layer1": None},
    "introduced_factor": {"stem": 2.5, "layer1": 1.7},
    "source": "cache:/somewhere/resnet50-abc.json",
}


def _oracle_cell(html: str) -> str:
    return re.search(r"<dt>oracle</dt><dd>(.*?)</dd>", html, re.S).group(1)


def test_a_calibration_renders_as_a_table_with_its_source(sample: dict[str, Any]) -> None:
    sample["oracle"] = {**sample["oracle"], "threshold_rule": "lognormal-tolerance",
                        "calibration": CALIBRATION}
    cell = _oracle_cell(render_html(sample, RenderedPlots()))
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", cell)
    assert rows == [("stem", "4.9", "2.5"), ("layer1", "10 (fixed)", "1.7")]
    assert "cache:/somewhere/resnet50-abc.json" in cell
    assert "{" not in cell  # no dict dumped on one line
    text = render_summary(sample, Path("run"))
    assert re.search(r"noise rule\s+lognormal-tolerance: per-anchor factors 4.9-4.9", text)
    assert "from cache:/somewhere/resnet50-abc.json" in text


def test_the_fixed_rule_is_named(sample: dict[str, Any]) -> None:
    sample["oracle"] = {**sample["oracle"], "threshold_rule": "fixed"}
    sample["oracle"].pop("calibration", None)
    cell = _oracle_cell(render_html(sample, RenderedPlots()))
    assert "noise rule: fixed: 10x the noise floor" in cell and "<table" not in cell
    assert "fixed: 10x the noise floor" in render_summary(sample, Path("run"))
