"""The drill-down in the terminal summary and in report.html."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from anpred.report.html import render_html
from anpred.report.terminal import render_summary
from anpred.store.summary import Summary
from anpred.store.summary_drill import DrillDown, DrillOp, DrillTarget

GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run" / "summary.json"


def _summary(drill: DrillDown | None) -> Summary:
    return replace(Summary.from_dict(json.loads(GOLDEN.read_text())), drill=drill)


def _drill() -> DrillDown:
    ops = tuple(
        DrillOp(f"op{k:04d}", f"/m/n{k}", "Conv", f"m.n{k}", v, 1e-6, v > 1e-6, v, v > 1e-6)
        for k, v in enumerate([2e-7, 3e-7, 4.2e-3, 1e-7], start=1)
    )
    named = DrillTarget("onnxruntime!bf16@s2", "s2", ops, "op0003", "introduced")
    unnamed = DrillTarget("jax", "s3", ops[:1], None, None, "no operator stands out")
    return DrillDown((named, unnamed), ("torch", "jax"), {"paddle": "crash at load"}, 9.0)


def test_the_terminal_names_the_operator_and_marks_it_in_the_chain(tmp_path: Path) -> None:
    text = render_summary(_summary(_drill()), tmp_path)
    assert "drill-down (flagged stages → operators) in 9.0s:" in text
    assert "onnxruntime!bf16@s2 @ s2: Conv /m/n3 (m.n3) introduces 4.2e-03" in text
    marked = [line for line in text.splitlines() if line.strip().startswith("»")]
    assert len(marked) == 1 and "/m/n3" in marked[0]
    assert "jax @ s3: no operator named (no operator stands out)" in text
    assert "drill jobs failed: paddle" in text


def test_without_a_drill_down_the_terminal_is_unchanged(tmp_path: Path) -> None:
    text = render_summary(_summary(None), tmp_path)
    assert "drill-down" not in text
    raw = render_summary(_summary(None).to_dict(), tmp_path)
    assert raw == text


def test_the_report_shows_each_chain_with_the_named_operator_in_bold() -> None:
    html = render_html(_summary(_drill()))
    assert 'id="drill"' in html or "Drill-down: operators of the flagged stages" in html
    assert "<strong><code>/m/n3</code></strong>" in html
    assert html.count("<code>/m/n") == 5  # 4 + 1 operators, each in its chain
    assert "stands out" in html
    empty = render_html(_summary(None))
    assert "No drill-down in this summary" in empty


def test_the_layers_of_a_stage_are_shown_with_the_named_layer_and_its_operators(
    tmp_path: Path,
) -> None:
    modules = ["layer2.0.conv1", "layer2.0.conv2", "layer2.1.conv1", "layer2.1.conv2"]
    ops = tuple(
        DrillOp(f"op{k:04d}", f"/m/n{k}", "Conv", m, v, 1e-6, v > 1e-6, c, c > 1e-6)
        for k, (m, v, c) in enumerate(
            zip(modules, [2e-7, 3e-7, 4.2e-3, 1e-7], [2e-7, 4e-7, 4.2e-3, 4.1e-3], strict=True),
            start=1,
        )
    )
    drill = DrillDown((DrillTarget("jax", "layer2", ops, "op0003", "introduced"),), ("jax",))
    text = render_summary(_summary(drill), tmp_path)
    assert "layers (error at the output): layer2.0 4.0e-07 · »layer2.1 4.1e-03*" in text
    assert "layer layer2.1 (2 of 2): operator 1 of 2 introduces error; its output 4.1e-03" in text
    # the operators shown are the named layer's
    shown = [line for line in text.splitlines() if line.startswith("    ") and "/m/n" in line]
    assert [line.split()[-1] for line in shown] == ["/m/n3", "/m/n4"]
    html = render_html(_summary(drill))
    assert "<strong><code>layer2.1</code></strong>" in html and "<code>layer2.0</code>" in html
