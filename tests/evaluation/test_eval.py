"""The evaluation grid end to end on a tiny grid (a small ONNX CNN, two libraries)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.errors import UsageError  # noqa: E402
from anpred.evaluation.grid import DEFAULT_GRID, load_grid  # noqa: E402


def anpred(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anpred", *args], capture_output=True,
                          text=True, timeout=900)


def test_grid_defaults_and_unknown_keys(tmp_path) -> None:
    assert load_grid(None) == DEFAULT_GRID
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"models": ["resnet50"], "faulty": ["jax"]}))
    grid = load_grid(path)
    assert grid.models == ("resnet50",) and grid.faults == DEFAULT_GRID.faults
    path.write_text(json.dumps({"modles": []}))
    with pytest.raises(UsageError, match="unknown grid key"):
        load_grid(path)
    # an explicit empty fault list injects nothing; configurations are checked on load
    path.write_text(json.dumps({"faults": [], "configurations": ["jax[nojit]"]}))
    grid = load_grid(path)
    assert grid.faults == () and grid.configurations == ("jax[nojit]",)
    path.write_text(json.dumps({"models": ["yolov8n", "yolo8n"]}))
    with pytest.raises(UsageError, match="'yolo8n' is not in the zoo"):
        load_grid(path)
    path.write_text(json.dumps({"models": [str(tmp_path / "missing.onnx")]}))
    with pytest.raises(UsageError, match="no such ONNX file"):
        load_grid(path)
    path.write_text(json.dumps({"configurations": ["jax[fast]"]}))
    with pytest.raises(UsageError, match=r"jax\[fast\]"):
        load_grid(path)


def test_study_grid_covers_every_zoo_model_and_configuration() -> None:
    from anpred.evaluation.grid import STUDY_CONFIGURATIONS
    from anpred.zoo.registry import model_names

    grid = load_grid(Path(__file__).parents[2] / "configs" / "study.json")
    assert sorted(grid.models) == sorted(model_names())
    assert grid.configurations == STUDY_CONFIGURATIONS and grid.faults == ()


def test_tiny_grid_end_to_end(tmp_path) -> None:
    model = tiny_cnn(tmp_path / "tiny.onnx")
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({
        "models": [str(model)], "libs": "torch,onnxruntime,jax", "faulty": ["onnxruntime"],
        "stages": ["r1", "s2"], "images": 2,
        "faults": [{"kind": "bf16", "op": "*", "severities": [1]}],
        "configurations": ["onnxruntime[O0]", "jax[bf16]"],
    }))
    out = tmp_path / "eval"
    proc = anpred("eval", "--config", str(grid), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (out / "eval.md").read_text()
    for heading in ("RQ1 detection", "RQ2 localization", "RQ3 characterization",
                    "False positives"):
        assert heading in text
    rows = list(csv.DictReader(open(out / "faults.csv")))
    assert [r["stage"] for r in rows] == ["r1", "s2"]
    # a bf16 round trip of a whole stage (relative error ~4e-3, fp32 noise ~1e-7) is
    # detected and localized at its stage, and blamed on the faulty library
    assert all(r["anpred_detected"] == "True" for r in rows)
    assert all(r["anpred_flagged_at_stage"] == "True" for r in rows)
    assert all(r["isolation_top1"] == "True" for r in rows)
    # each fault run says how it came out, and the runs' pruning is said once for all
    outcomes = [line for line in proc.stderr.splitlines() if "baselines flag it" in line]
    assert [line.split(":")[0].strip() for line in outcomes] == ["fault 1/2", "fault 2/2"]
    assert all("detected (flagged at its stage yes, isolation top-1 yes" in o for o in outcomes)
    # the time left, from the pace of the runs so far: after the first, not after the last
    assert re.search(r"\(\d+ s; about \d+ (s|min( \d+ s)?) left\)$", outcomes[0]), outcomes[0]
    assert outcomes[1].endswith(" s)"), outcomes[1]
    assert proc.stderr.count("keep captures by need") == 2  # the clean run, then the rest
    # the clean participants of the fault runs are the clean run's (linked, not re-run)
    fault_dirs = list((out / "tiny" / "faults").iterdir())
    assert len(fault_dirs) == 2
    assert (fault_dirs[0] / "captures" / "jax").is_symlink()
    assert (out / "plots" / "detection.png").stat().st_size > 1000
    # issue 14: thresholds calibrated on a clean run on synthetic inputs judge the clean and
    # fault runs; the severity curves and their table are in the report
    clean = json.loads((out / "tiny" / "clean" / "summary.json").read_text())
    assert clean["oracle"]["threshold_rule"] == "lognormal-tolerance"
    assert set(clean["oracle"]["calibration"]["inputs"]).isdisjoint(
        i["id"] for i in clean["inputs"]
    )
    assert (fault_dirs[0] / "calibration.json").is_symlink()
    assert "## Severity curves" in text and "detects half from" in text
    assert (out / "plots" / "severity.png").stat().st_size > 1000
    # the configuration study: clean participants linked, only the configurations ran;
    # jax computing in bfloat16 is judged in its precision class, against the ideal bf16
    # reference (its error ~4e-3 is what correct bf16 arithmetic costs: measured 1.1-1.4x
    # the ideal's on this model, under CLASS_FACTOR 3), so neither configuration deviates
    study = out / "tiny" / "configurations"
    assert (study / "captures" / "jax").is_symlink()
    assert not (study / "captures" / "jax[bf16]").is_symlink()
    section = text.split("## Real-configuration study", 1)[1]
    rows = {
        line.split(" | ")[1]: line
        for line in section.splitlines()
        if line.startswith(f"| {model} |")
    }
    assert set(rows) == {"onnxruntime[O0]", "jax[bf16] (bf16)"}
    assert "| no (0/" in rows["jax[bf16] (bf16)"] and "| no (0/" in rows["onnxruntime[O0]"]
    assert (study / "captures" / "torch_ideal-bf16").is_dir()  # the ideal bf16 reference ran
    assert (out / "plots" / "configurations.png").stat().st_size > 1000
    # an interrupted study resumes: finished configuration workers are not run again
    # (its record in the results folder, the run store's top here, is written at its end)
    (study / "summary.json").unlink()
    (out / "records" / "tiny" / "configurations.json.gz").unlink()
    again = anpred("eval", "--config", str(grid), "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[jax[bf16]] already done (resumed)" in again.stderr
    assert "[jax[bf16]] started" not in again.stderr
    assert (study / "summary.json").exists()


def test_grid_sizes_are_checked(tmp_path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"sizes": [320, 640]}))
    assert load_grid(path).sizes == (320, 640)
    for bad in ([640], [320, 500]):
        path.write_text(json.dumps({"sizes": bad}))
        with pytest.raises(UsageError, match="multiples of 32"):
            load_grid(path)


def test_size_table_shows_the_worst_anchor_and_the_output() -> None:
    from anpred.evaluation.campaign import ModelResult
    from anpred.evaluation.tables import size_table
    from anpred.localization.sweep import sweep_by_anchor

    sizes = [320, 480, 640]
    errors = {"p3": [1e-6, 2e-6, 4e-6], "p5": [2e-5, 1e-5, 3e-5], "output": [1e-7, 1e-7, 1e-7]}
    fits = {a: f.to_dict() for a, f in sweep_by_anchor(sizes, errors).items()}
    result = {"sizes": sizes, "participants": {"jax": {"errors": errors, "fits": fits}}}
    table = size_table([ModelResult("yolov8n", {}, sweep=result)])
    rows = [line for line in table.splitlines() if line.startswith("| yolov8n")]
    assert [r.split(" | ")[2] for r in rows] == ["p5", "output"]
    assert "| 2.0e-05 | 3.0e-05 |" in rows[0] and fits["p5"]["trend"] in rows[0]


def test_grid_calibration_key_and_fp32_configurations(tmp_path) -> None:
    from anpred.evaluation.grid import fp32_configurations

    assert DEFAULT_GRID.calibration == 4 and DEFAULT_GRID.to_dict()["calibration"] == 4
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"calibration": 0}))
    assert load_grid(path).calibration == 0  # the fixed noise factor judges
    for bad in (1, -2, "4", True):
        path.write_text(json.dumps({"calibration": bad}))
        with pytest.raises(UsageError, match="calibration"):
            load_grid(path)
    # reduced-precision configurations are not legitimate fp32 implementations
    assert fp32_configurations(
        ("torch[compile]", "torch[bf16]", "jax[nojit]", "openvino[bf16]", "onnxruntime[O0]")
    ) == ("torch[compile]", "jax[nojit]", "onnxruntime[O0]")
