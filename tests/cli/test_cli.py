from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _anpred(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anpred", *args], capture_output=True, text=True)


def test_help_lists_subcommands_and_exit_codes() -> None:
    proc = _anpred("--help")
    assert proc.returncode == 0
    for word in ("models", "libs", "run", "report", "exit codes"):
        assert word in proc.stdout
    run_help = _anpred("run", "--help").stdout
    for flag in (
        "--libs",
        "--images",
        "--image",
        "--granularity",
        "--anchors",
        "--weights",
        "--out",
        "--seed",
    ):
        assert flag in run_help


def test_no_command_is_usage_error() -> None:
    assert _anpred().returncode == 2


def test_libs_lists_every_library_with_configurations() -> None:
    proc = _anpred("libs", "--json")
    assert proc.returncode == 0
    libs = {entry["library"]: entry for entry in json.loads(proc.stdout)}
    assert set(libs) >= {"torch", "onnxruntime", "openvino", "tensorflow", "jax", "paddle"}
    assert "onnxruntime[O0]" in libs["onnxruntime"]["participants"]
    assert "torch[fp64]" in libs["torch"]["participants"]
    # issue 35: every configuration's declared precision
    assert libs["openvino"]["precision"]["openvino[f16]"]["class"] == "fp16"
    assert libs["torch"]["precision"]["torch[bf16]"]["scope"] == "matmul"
    assert libs["onnxruntime"]["precision"]["onnxruntime[O3]"]["class"] == "fp32"
    table = _anpred("libs").stdout
    assert "torch[bf16] (bf16 conv/matmul)" in table and "ideal-bf16" not in table.split("\n\n")[0]


@pytest.mark.slow
def test_models_lists_the_zoo_with_anchor_counts() -> None:
    proc = _anpred("models", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    models = {m["name"]: m for m in json.loads(proc.stdout)}
    assert len(models) >= 8
    for name in ("yolov5n", "yolov5s", "yolov8n", "yolov8s", "resnet50"):
        assert models[name]["anchors"]["stage"] >= 6
        assert models[name]["anchors"]["layer"] > models[name]["anchors"]["stage"]
    assert "BatchNorm recalibrated" in models["yolov8n"]["weights"]
