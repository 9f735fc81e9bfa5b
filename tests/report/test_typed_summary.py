"""The renderers take the typed summary the pipeline hands them, as they take its JSON."""

from __future__ import annotations

import json
from pathlib import Path

from anpred.report.html import render_html
from anpred.report.plots import RenderedPlots
from anpred.report.terminal import render_summary
from anpred.store.summary import Summary

#: A real summary with findings (see tests/pipeline/test_golden_analysis.py).
GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run" / "summary.json"


def test_typed_and_json_summaries_render_the_same() -> None:
    raw = json.loads(GOLDEN.read_text())
    typed = Summary.from_dict(raw)
    text = render_summary(typed, Path("r"))
    assert text == render_summary(raw, Path("r"))
    assert "10 findings (onnxruntime!bf16@s2 10)" in text
    html = render_html(typed, RenderedPlots())
    assert "onnxruntime!bf16@s2" in html and "10 findings" in html
