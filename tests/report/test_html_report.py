from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from anpred.report.html import render_html, write_report
from anpred.report.plots import PLOTS, RenderedPlots

HEADINGS = ("Verdict at a glance", "Deviation heatmap", "Propagation along the anchors",
            "Introduced error per stage (stage isolation)", "Per-channel error at the worst anchor",
            "Baselines vs anpred", "Findings", "Observer effect and alignment",
            "Library versions and settings", "Unaligned and failed items")
IMG = '<img src="data:image/png;base64,'
SAMPLE = Path(__file__).parent / "data" / "summary.json"


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("run")
    path = write_report(run_dir, json.loads(SAMPLE.read_text()))
    return path, path.read_text(encoding="utf-8")


def _embedded(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'data:image/png;base64,([A-Za-z0-9+/=]+)"',
                                                    html)]


def test_sample_report_has_every_section_and_one_embedded_png_per_plot(
        sample_report: tuple[Path, str]) -> None:
    path, html = sample_report
    assert path.name == "report.html" and path.is_file()
    for heading in HEADINGS:
        assert f">{heading}</h2>" in html, heading
    assert html.count(IMG) == len(PLOTS) == 4
    assert "could not be drawn" not in html
    files = {p.stem: p.read_bytes() for p in (path.parent / "plots").glob("*.png")}
    assert set(files) == set(PLOTS)
    assert sorted(_embedded(html)) == sorted(files.values())
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in files.values())


def test_sample_report_is_self_contained(sample_report: tuple[Path, str]) -> None:
    _, html = sample_report
    assert "http://" not in html and "https://" not in html
    # Every src/href is an embedded image or an in-page link: nothing to fetch.
    targets = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert targets and all(t.startswith(("data:image/png;base64,", "#")) for t in targets)
    assert "<script" not in html and "<link" not in html and "@import" not in html


def test_sample_report_content(sample_report: tuple[Path, str]) -> None:
    _, html = sample_report
    assert "clean</span> no findings; 3 participants judged" in html
    # onnxruntime has the smallest output deviation from fp64 in the sample (2.66e-7).
    assert "onnxruntime (relative L2 2.7e-07)" in html
    baselines = html.split(">Baselines vs anpred</h2>")[1]
    row = re.search(r"<tr><td>onnxruntime</td>.*?</tr>", baselines)
    assert row is not None
    # All but dynamo_same fail onnxruntime's output (allclose and D_MAD on one input).
    assert re.findall(r">(PASS|FAIL \d/2)<", row.group(0)) == [
        "FAIL 1/2", "FAIL 2/2", "FAIL 2/2", "FAIL 2/2", "FAIL 1/2", "PASS"]
    assert 'title="failed inputs: bus, zidane">FAIL 2/2' in row.group(0)
    assert "2026.4.1-22982-e213a147257-releases/2026/4" in html  # full version, from status
    assert "cast float32-&gt;float64 <span class=\"small\">(all 9 anchors)</span>" in html
    assert "backbone.p1 → backbone.p2 ×2.95" in html  # torch's strongest amplification


def test_findings_table_and_verdict(with_findings: dict[str, Any]) -> None:
    html = render_html(with_findings, RenderedPlots())
    findings = html.split(">Findings</h2>")[1].split("</section>")[0]
    assert findings.count("<tr><td>openvino</td><td>neck.p4</td>") == 2
    row = "<td>openvino</td><td>neck.p5</td><td>bus</td><td>rel_l2</td><td>4.2e-04</td>"
    assert row in findings
    assert "wasserstein, max_abs" in findings
    assert "3 findings</span> openvino: 3" in html
    assert "2 of 6 (participant, input) cases have anchor findings" in html
    assert "83.4 s" in html


def test_hostile_strings_are_escaped(tmp_path: Path, hostile: dict[str, Any]) -> None:
    html = write_report(tmp_path, hostile).read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    # Model (title, header, verdict), input, participant, setting, message, finding, unaligned.
    assert html.count(escaped) >= 10
    assert f"<title>anpred report: {escaped}</title>" in html
    assert html.count(IMG) == 4  # matplotlib drew the hostile labels as text


def test_partial_summary_renders(tmp_path: Path, partial: dict[str, Any]) -> None:
    html = write_report(tmp_path, partial).read_text(encoding="utf-8")
    for heading in HEADINGS:
        assert f">{heading}</h2>" in html
    assert "could not be drawn" not in html
    assert "tensorflow failed (crash at load): Segmentation fault (core dumped) while importing " \
           "&lt;tensorflow&gt;" in html
    assert "shape (1, 8400, 84) cannot be aligned to (1, 84, 8400)" in html
    assert "No stage-isolation data" in html and "No per-channel data" in html
    assert {p.stem for p in (tmp_path / "plots").glob("*.png")} == {"heatmap", "propagation"}


def test_rerender_removes_plots_that_lost_their_data(tmp_path: Path,
                                                     partial: dict[str, Any]) -> None:
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "introduced.png").write_bytes(b"from an earlier rendering")
    write_report(tmp_path, partial)
    assert not (tmp_path / "plots" / "introduced.png").exists()


def test_empty_summary_renders(tmp_path: Path) -> None:
    html = write_report(tmp_path / "new", {}).read_text(encoding="utf-8")
    assert "no verdict" in html and IMG not in html
    assert not list((tmp_path / "new" / "plots").iterdir())


@pytest.mark.parametrize("key", sorted(json.loads(SAMPLE.read_text())) + ["wall_seconds"])
@pytest.mark.parametrize("damage", ["missing", "null", "wrong type"])
def test_any_top_level_key_missing_null_or_wrong_type_renders(
        sample: dict[str, Any], key: str, damage: str) -> None:
    summary = copy.deepcopy(sample)
    if damage == "missing":
        summary.pop(key, None)
    else:
        summary[key] = None if damage == "null" else 7
    html = render_html(summary, RenderedPlots())
    assert all(f">{h}</h2>" in html for h in HEADINGS)


def test_nested_nulls_render(sample: dict[str, Any]) -> None:
    sample["localization"]["participants"]["torch"] = None
    sample["localization"]["participants"]["openvino"]["concentration"] = None
    sample["characterization"]["propagation"]["torch"]["profiles"]["bus"] = None
    sample["characterization"]["propagation"]["onnxruntime"]["dimension_at_worst"] = None
    sample["baselines"]["cradle_dmad"]["torch"] = None
    sample["participants"][0]["observer"] = None
    sample["participants"][1] = {"participant": "onnxruntime"}
    sample["findings"] = [None, {"participant": "torch", "metrics": None}]
    html = render_html(sample, RenderedPlots())
    assert ">Findings</h2>" in html and "<td>torch</td>" in html
