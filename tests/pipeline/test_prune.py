"""Captures by need (``--keep-captures``): what a judged run keeps, and that a pruned run is
judged again from its statistics with the same results, resumes, and says what it cannot
re-derive."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from anpred.analysis.oracle import AnchorEvidence, Deviation, OracleParams, judge_anchor
from anpred.pipeline.evidence import RunEvidence
from anpred.pipeline.prune import NOTE_START, needed_anchors
from anpred.pipeline.statistics import from_record, to_record
from conftest import anpred, summary

LIBS = "torch,onnxruntime,openvino"


def _evidence(input_id: str, scale: float) -> AnchorEvidence:
    values = {"torch": 1e-7, "onnxruntime": 2e-7 * scale, "openvino": 1.5e-7}
    return AnchorEvidence(
        "s2",
        input_id,
        tuple(
            Deviation(
                p,
                "s2",
                input_id,
                {"rel_l2": np.float64(v), "cosine": np.float32(v / 3)},
                {"rel_l2": v * 1.1, "cosine": v / 4},
                0,
            )
            for p, v in values.items()
        ),
        {"rel_l2": 1e-7, "cosine": np.float32(3e-8)},
        3,
        {"rel_l2": 1.2e-7, "cosine": 4e-8},
    )


def test_statistics_round_trip_judges_the_same() -> None:
    ev = RunEvidence(
        evidence={"s2": [_evidence(f"in{k}", 1 + 30 * (k == 2)) for k in range(4)]},
        baselines={"in0": {"max_abs_1e-3": {"onnxruntime": {"passed": True, "value": 0.1}}}},
        introduced={("onnxruntime", "in0"): {"s2": 3e-7}},
        dimension={("onnxruntime", "s2", "in0"): {"top_channels": [1, 2]}},
        alignment={"onnxruntime": {"s2": ["NHWC->NCHW"]}},
        unaligned=[{"anchor": "s2", "input": "in9", "reason": "x"}],
        observer={"onnxruntime": {"in0": {"identical": True}}},
    )
    record = json.loads(json.dumps(to_record(ev)))  # what the file holds
    back = from_record(record)
    assert back == ev
    params = OracleParams(metrics=("cosine",))
    original = judge_anchor(ev.evidence["s2"], params)
    again = judge_anchor(back.evidence["s2"], params)
    assert [v.statistics() for v in again] == [v.statistics() for v in original]
    assert any(v.finding for v in original)  # the test judges something


def test_needed_anchors_first_input_whole_and_finding_anchors() -> None:
    found = SimpleNamespace(
        input_ids=["a", "b", "c"],
        findings=[
            SimpleNamespace(participant="x", anchor="s2", input="b"),
            SimpleNamespace(participant="y", anchor="out", input="b"),
            SimpleNamespace(participant="x", anchor="s1", input="a"),
        ],
    )
    assert needed_anchors(found) == {"a": None, "b": {"s2", "out"}, "c": set()}  # type: ignore[arg-type]


def _npz(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in (run / "captures").glob("*/*.npz"))


def _judged(data: dict) -> dict:
    """What the analysis decides (timings and wall times left out)."""
    keys = ("findings", "localization", "characterization", "baselines", "deviation")
    return {k: data[k] for k in (*keys, "noise_floor", "oracle", "anchors", "inputs")}


def test_needed_prunes_and_the_pruned_run_is_judged_again_identically(tiny_onnx, tmp_path):
    run = tmp_path / "run"
    proc = anpred("run", str(tiny_onnx), "--libs", LIBS, "--images", "3", "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = summary(run)
    # the first input (bus) whole, both kinds; no findings: nothing else
    assert _npz(run) == sorted(
        [
            f"captures/{p}/bus.{k}.npz"
            for p in ("torch", "onnxruntime", "openvino")
            for k in ("capture", "isolated")
        ]
        + ["captures/torch_fp64/bus.capture.npz"]
    )
    record = json.loads((run / "pruned.json").read_text())
    assert record["first_input"] == "bus"
    assert record["pruned"]["onnxruntime"]["isolated"] == ["astronaut", "zidane"]
    assert record["bytes_after"] < record["bytes_before"]
    assert "keep captures by need" in proc.stderr
    report = anpred("report", str(run))
    assert report.returncode == 0, report.stderr[-2000:]
    notes = [ln for ln in report.stderr.splitlines() if ln.startswith(NOTE_START)]
    assert len(notes) == 1 and "not re-derivable without them" in notes[0]
    assert _judged(summary(run)) == _judged(first)
    resumed = anpred("run", str(tiny_onnx), "--libs", LIBS, "--images", "3", "--out", str(run))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "already done (resumed)" in resumed.stderr
    assert _judged(summary(run)) == _judged(first)


def test_keep_all_keeps_every_capture(tiny_onnx, tmp_path) -> None:
    run = tmp_path / "run"
    proc = anpred(
        "run", str(tiny_onnx), "--libs", "torch,onnxruntime", "--images", "2",
        "--keep-captures", "all", "--out", str(run),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(_npz(run)) == 2 * 2 * 2 + 2  # participants x inputs x kinds + fp64 reference
    assert not (run / "pruned.json").exists() and (run / "statistics.json.gz").exists()
    bad = anpred("run", str(tiny_onnx), "--keep-captures", "some", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "--keep-captures" in bad.stderr


@pytest.mark.slow
def test_findings_identical_in_needed_and_all_mode(tiny_onnx, tmp_path) -> None:
    runs = {}
    for mode in ("needed", "all"):
        runs[mode] = tmp_path / mode
        proc = anpred(
            "inject", str(tiny_onnx), "--lib", "onnxruntime", "--stage", "s2", "--fault",
            "bf16", "--libs", LIBS, "--images", "3", "--keep-captures", mode,
            "--out", str(runs[mode]),
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr[-3000:]  # findings
    needed, full = summary(runs["needed"]), summary(runs["all"])
    assert needed["findings"] and _judged(needed) == _judged(full)
    # the faulty onnxruntime's rewritten graph goes with the captures, kept in "all" mode
    assert list((runs["all"] / "captures").glob("*/model/*.onnx"))
    assert not list((runs["needed"] / "captures").glob("*/model"))
    assert json.loads((runs["needed"] / "pruned.json").read_text())["graph_bytes_removed"] > 0
    assert needed["drill"]["targets"] == full["drill"]["targets"]
    # inputs with findings keep the anchors with findings, for every participant
    kept = json.loads((runs["needed"] / "pruned.json").read_text())["kept_anchors"]
    assert kept == {"astronaut": ["output", "s2"], "zidane": ["output", "s2"]}
    with np.load(runs["needed"] / "captures" / "torch_fp64" / "zidane.capture.npz") as data:
        assert sorted(data.files) == ["output", "s2"]
    assert anpred("report", str(runs["needed"])).returncode == 0
    assert _judged(summary(runs["needed"])) == _judged(full)
