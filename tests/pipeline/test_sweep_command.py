from __future__ import annotations

import json

import pytest

from conftest import anpred


def test_sweep_refuses_onnx_files(tiny_onnx, tmp_path) -> None:
    proc = anpred("sweep", str(tiny_onnx), "--out", str(tmp_path / "s"))
    assert proc.returncode == 2 and "zoo model" in proc.stderr


def test_sweep_refuses_a_fixed_size_zoo_model(tmp_path) -> None:
    proc = anpred("sweep", "vit_b_16", "--sizes", "320,480", "--out", str(tmp_path / "s"))
    assert proc.returncode == 2 and "vit_b_16's input size is fixed" in proc.stderr


def test_a_grid_sweeps_only_resizable_zoo_models() -> None:
    from anpred.evaluation.campaign import _sweeps
    from anpred.evaluation.grid import EvalGrid

    grid = EvalGrid(models=("yolov8n",), sizes=(320, 480))
    assert _sweeps(grid, "yolov8n") and _sweeps(grid, "resnet50")
    assert not _sweeps(grid, "vit_b_16") and not _sweeps(grid, "bert_tiny")
    assert not _sweeps(grid, "models/common_det.onnx")


@pytest.mark.slow
def test_sweep_runs_each_size_and_fits_the_trend(tmp_path) -> None:
    out = tmp_path / "sweep"
    proc = anpred("sweep", "yolov8n", "--sizes", "256,384", "--libs", "torch,onnxruntime",
                  "--images", "1", "--no-isolation", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "sweep.json").read_text())
    assert result["sizes"] == [256, 384]
    fits = result["participants"]["onnxruntime"]["fits"]
    assert "backbone.p3" in fits and fits["backbone.p3"]["trend"]
    shapes = [json.loads((out / f"size-{s}" / "model.json").read_text())["input_shape"]
              for s in (256, 384)]
    assert shapes == [[1, 3, 256, 256], [1, 3, 384, 384]]
