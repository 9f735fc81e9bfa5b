from __future__ import annotations

import json

import pytest

from conftest import anpred


def test_sweep_refuses_onnx_files(tiny_onnx, tmp_path) -> None:
    proc = anpred("sweep", str(tiny_onnx), "--out", str(tmp_path / "s"))
    assert proc.returncode == 2 and "zoo model" in proc.stderr


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
