"""End to end: ``anpred calibrate`` caches a calibration of the tiny ONNX model; ``anpred
run`` reuses it (and says so), falls back to the fixed rule for another participant set,
and ``--calibration off`` keeps the fixed rule.

An evaluation's calibration run is cached the same way.

Measured on the shared 2-core machine: calibrate 6.6 s, each run 7 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import anpred, summary

LIBS = "torch,onnxruntime,jax"


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {"ANPRED_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}


@pytest.mark.slow
def test_a_cached_calibration_is_reused_by_run(tiny_onnx, tmp_path, env) -> None:
    proc = anpred(
        "calibrate",
        str(tiny_onnx),
        "--libs",
        LIBS,
        "--inputs",
        "4",
        "--out",
        str(tmp_path / "cal"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cached = Path(proc.stdout.split("cached: ")[1].splitlines()[0])
    assert cached.parent == Path(env["ANPRED_CACHE"]) / "calibrations"
    record = json.loads(cached.read_text())
    assert record["key"]["participants"] == ["jax", "onnxruntime", "torch"]
    assert record["calibration"]["inputs"] == [f"synthetic{i}" for i in range(4)]

    run = tmp_path / "run"
    proc = anpred("run", str(tiny_onnx), "--libs", LIBS, "--out", str(run), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"from the cache: {cached}" in proc.stderr
    oracle = summary(run)["oracle"]
    assert oracle["threshold_rule"] == "lognormal-tolerance"
    assert oracle["calibration"]["source"] == f"cache:{cached}"
    assert oracle["calibration"]["factor"] == {
        a: t["factor"] for a, t in record["calibration"]["anchors"].items()
    }
    assert "noise rule    lognormal-tolerance" in proc.stdout
    assert 'class="calibration"' in (run / "report.html").read_text()

    other = tmp_path / "pair"
    proc = anpred(
        "run", str(tiny_onnx), "--libs", "torch,onnxruntime", "--out", str(other), env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "are for the fp32 participants jax,onnxruntime,torch" in proc.stderr
    assert summary(other)["oracle"]["threshold_rule"] == "fixed"
    assert "noise rule    fixed: 10x" in proc.stdout
    assert not (other / "calibration.json").exists()

    proc = anpred(
        "run", str(tiny_onnx), "--libs", LIBS, "--out", str(run), "--calibration", "off", env=env
    )  # resumed: analysed again, fixed rule
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary(run)["oracle"]["threshold_rule"] == "fixed"


@pytest.mark.slow
def test_an_evaluation_caches_its_calibration_for_later_runs(tiny_onnx, tmp_path, env) -> None:
    grid = tmp_path / "grid.json"
    grid.write_text(
        json.dumps(
            {
                "models": [str(tiny_onnx)],
                "libs": LIBS,
                "images": 1,
                "faults": [],
                "configurations": ["onnxruntime[O0]"],
                "calibration": 2,
            }
        )
    )
    proc = anpred("eval", "--config", str(grid), "--out", str(tmp_path / "eval"), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cached = Path(proc.stderr.split("calibration cached: ")[1].splitlines()[0])
    assert cached.parent == Path(env["ANPRED_CACHE"]) / "calibrations"
    record = json.loads(cached.read_text())
    # the evaluation calibrates on its participants and its fp32 configurations
    assert record["key"]["participants"] == ["jax", "onnxruntime", "onnxruntime[O0]", "torch"]
    assert record["calibration"]["inputs"] == ["synthetic0", "synthetic1"]
    clean = summary(tmp_path / "eval" / "tiny" / "clean")["oracle"]["calibration"]
    assert clean["factor"] == {a: t["factor"] for a, t in record["calibration"]["anchors"].items()}

    run = tmp_path / "run"
    libs = f"{LIBS},onnxruntime[O0]"
    proc = anpred(
        "run", str(tiny_onnx), "--libs", libs, "--images", "1", "--out", str(run), env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"from the cache: {cached}" in proc.stderr
    assert summary(run)["oracle"]["calibration"]["source"] == f"cache:{cached}"


def test_bad_calibration_flags_are_one_line_errors(tiny_onnx, tmp_path, env) -> None:
    proc = anpred(
        "run",
        str(tiny_onnx),
        "--calibration",
        str(tmp_path / "missing.json"),
        "--out",
        str(tmp_path / "r"),
        env=env,
    )
    assert proc.returncode == 2 and "--calibration takes auto, off" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = anpred("calibrate", str(tiny_onnx), "--images", "3", env=env)
    assert proc.returncode == 2 and "--images does not apply to calibrate" in proc.stderr
