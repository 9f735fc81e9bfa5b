"""The compact results folder: a campaign resumes from it alone (issue 39)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.evaluation.results import ResultsFolder, _typed, fault_key, row_key  # noqa: E402
from anpred.inject.spec import FaultSpec  # noqa: E402

#: Two stages x (bf16, an approx_act that matches no node of r1 or s2... r1 is a Relu);
#: torch and onnxruntime only, one image, no calibration: the cheapest campaign with a
#: skipped fault.
GRID = {
    "libs": "torch,onnxruntime",
    "faulty": ["onnxruntime"],
    "stages": ["r1", "s2"],
    "images": 1,
    "calibration": 0,
    "faults": [
        {"kind": "bf16", "op": "*", "severities": [1]},
        {"kind": "eps", "op": "*", "severities": [100]},
    ],
}


def anpred(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def test_a_campaign_resumes_from_its_results_folder_alone(tmp_path) -> None:
    model = tiny_cnn(tmp_path / "tiny.onnx")
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({**GRID, "models": [str(model)]}))
    out, results = tmp_path / "runs", tmp_path / "results"
    first = anpred("eval", "--config", str(grid), "--out", str(out), "--results", str(results))
    assert first.returncode == 0, first.stderr[-3000:]
    # the tables and records are in the results folder, not in the run store
    assert not (out / "faults.csv").exists() and (results / "eval.md").is_file()
    rows = list(csv.DictReader(open(results / "faults.csv")))
    assert [(r["stage"], r["kind"]) for r in rows] == [("r1", "bf16"), ("s2", "bf16")]
    skipped = list(csv.DictReader(open(results / "skipped.csv")))
    assert [(r["stage"], r["kind"]) for r in skipped] == [("r1", "eps"), ("s2", "eps")]
    assert all("normaliz" in r["reason"] or "match" in r["reason"] for r in skipped), skipped
    assert (results / "records" / "tiny" / "clean.json.gz").is_file()
    # the three findings as data: each library's introduced error shared over its stages
    stages = list(csv.DictReader(open(results / "stages.csv")))
    libraries = {r["library"] for r in stages}
    assert libraries == {"torch", "onnxruntime"}
    for lib in libraries:
        mine = [r for r in stages if r["library"] == lib]
        assert [r["stage"] for r in mine] == ["r1", "s2", "output"]
        assert abs(sum(float(r["share"]) for r in mine) - 1) < 1e-9
    steps = list(csv.DictReader(open(results / "propagation.csv")))
    assert [(r["source"], r["target"]) for r in steps if r["library"] == "torch"] == [
        ("r1", "s2"),
        ("s2", "output"),
    ]
    assert all(r["direction"] in ("-1", "0", "1") for r in steps)
    findings = (results / "findings.md").read_text()
    assert "| tiny | onnxruntime | 3 |" in findings  # concentration: 3 stages
    assert (results / "plots" / "propagation.png").stat().st_size > 1000
    clean = {r["library"]: r for r in csv.DictReader(open(results / "clean.csv"))}
    assert clean["onnxruntime"]["anpred_findings"] == "0" and clean["onnxruntime"]["cells"] == "3"
    size = sum(p.stat().st_size for p in results.rglob("*") if p.is_file())
    assert size < 2_000_000, size  # compact: tables, rows and two summaries
    before = (results / "faults.csv").read_bytes(), (results / "eval.md").read_text()

    shutil.rmtree(out)  # the machine is gone; the results folder was committed
    again = anpred("eval", "--config", str(grid), "--out", str(out), "--results", str(results))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "everything read back from" in again.stderr
    assert "(2 fault runs, 2 faults not applicable, the clean run): nothing to run" in (
        again.stderr
    )
    assert "started" not in again.stderr and "clean run" not in again.stderr.replace(
        "the clean run)", ""
    )
    assert not out.exists() or not any(out.rglob("summary.json"))  # nothing ran
    assert (results / "faults.csv").read_bytes() == before[0]
    assert (results / "eval.md").read_text() == before[1]

    # one more severity: only its two fault runs run (the clean run again, its store gone)
    grid.write_text(json.dumps({**GRID, "models": [str(model)], "faults": [
        *GRID["faults"], {"kind": "mantissa", "op": "*", "severities": [10]}]}))  # fmt: skip
    more = anpred("eval", "--config", str(grid), "--out", str(out), "--results", str(results))
    assert more.returncode == 0, more.stderr[-3000:]
    assert "4 of 6 fault runs already in" in more.stderr
    assert "(2 rows, 2 not applicable): not run again; 2 to run" in more.stderr
    assert [line.split(":")[0].strip() for line in more.stderr.splitlines()
            if "baselines flag it" in line] == ["fault 5/6", "fault 6/6"]  # fmt: skip
    rows = list(csv.DictReader(open(results / "faults.csv")))
    assert [(r["stage"], r["kind"]) for r in rows] == [
        ("r1", "bf16"), ("s2", "bf16"), ("r1", "mantissa"), ("s2", "mantissa")]  # fmt: skip


def test_rows_read_back_with_their_types(tmp_path) -> None:
    spec = FaultSpec.from_dict({"stage": "s2", "op": "*", "kind": "mantissa", "severity": 10})
    row = {"model": "m", "library": "onnxruntime", "participant": "p", "stage": "s2",
           "stage_index": 2, "kind": "mantissa", "op": "*", "severity": 10, "node": "",
           "partial": "", "anpred_detected": True, "anpred_flagged_at_stage": False,
           "emergence_at_stage": 0.5, "isolation_top1": True, "isolation_top3": True,
           "library_blamed": False, "other_flagged": ["jax"],
           "output_rel_l2_vs_fp64": None, "stage_rel_l2_vs_fp64": 1.25e-07,
           "baseline:cradle_dmad": False}  # fmt: skip
    folder = ResultsFolder(tmp_path)
    folder.add("m", fault_key("onnxruntime", spec), row)
    again = ResultsFolder(tmp_path)
    assert again.row("m", fault_key("onnxruntime", spec)) == row
    assert row_key(row) == fault_key("onnxruntime", spec)
    # severities compare as numbers whatever their spelling
    assert _typed({"severity": "0.25"})["severity"] == 0.25
    assert row_key({**row, "severity": "10.0"}) == row_key(row)


def test_totals_per_model_and_faulty_library() -> None:
    from anpred.evaluation.tables import totals_table

    def row(model: str, lib: str, anpred: bool, dmad: bool, exact: bool) -> dict[str, object]:
        return {
            "model": model,
            "library": lib,
            "anpred_detected": anpred,
            "isolation_top1": exact,
            "library_blamed": True,
            "baseline:cradle_dmad": dmad,
        }

    rows = [
        row("m", "onnxruntime", True, True, True),
        row("m", "onnxruntime", True, False, False),
        row("m", "paddle", False, False, False),
        row("n", "paddle", True, True, True),
    ]
    lines = totals_table(rows).splitlines()
    assert (
        lines[0]
        == "| model | faulty library | faults | anpred | cradle_dmad | exact stage + library |"
    )
    assert lines[2:] == [
        "| m | onnxruntime | 2 | 2/2 | 1/2 | 1/2 |",
        "| m | paddle | 1 | 0/1 | 0/1 | 0/1 |",
        "| **m** | **all** | 3 | 2/3 | 1/3 | 1/3 |",
        "| n | paddle | 1 | 1/1 | 1/1 | 1/1 |",
        "| **all** | **all** | 4 | 3/4 | 2/4 | 2/4 |",
    ]


def test_rows_of_other_settings_are_dropped(tmp_path) -> None:
    from anpred.evaluation.results import model_settings

    spec = FaultSpec.from_dict({"stage": "s2", "op": "*", "kind": "bf16", "severity": 1})
    said: list[str] = []
    folder = ResultsFolder(tmp_path)
    first = model_settings("m", "all", 2, "stage", 4, ("torch[compile]",))
    assert folder.start_model("m", first, said.append) is False
    folder.add("m", fault_key("onnxruntime", spec), None, "matches no node")
    again = ResultsFolder(tmp_path)
    assert again.start_model("m", first, said.append) is False and said == []
    assert again.done("m", fault_key("onnxruntime", spec))
    # a calibration on another population judges every run differently: dropped, said
    other = model_settings("m", "all", 2, "stage", 4, ())
    assert again.start_model("m", other, said.append) is True
    assert "other settings (calibrated_on)" in said[0] and not again.done(
        "m", fault_key("onnxruntime", spec)
    )
    assert not ResultsFolder(tmp_path).done("m", fault_key("onnxruntime", spec))
