"""ncnn runner: pnnx conversion of the anchored model and ncnn inference, hooks driven in
the runtime's own environment (skipped when it is not built), compared with onnxruntime.

Tolerances come from measurements with pnnx 20261020 / ncnn 1.0.20261020 on this machine
(AMD EPYC, AVX-512, 1 thread): fp32 rel L2 vs onnxruntime on the tiny model <= 4e-7 per
output; on yolov8n 1.2e-6 at the output and 3.4e-5 at the worst anchor (neck.p5).
"""

from __future__ import annotations

import numpy as np
import pytest
from deploy_hooks import (
    env_python,
    offline_wrapper,
    ort_outputs,
    rel_l2,
    run_hooks,
    yolo_feeds,
)

PYTHON = env_python("ncnn")
pytestmark = pytest.mark.skipif(PYTHON is None, reason="the ncnn environment is not built")

#: fp32 rel L2 bound vs onnxruntime per output on the tiny model (measured <= 4e-7).
TINY_FP32 = 1e-5
#: fp32 bounds on yolov8n (measured 1.2e-6 at the output, 3.4e-5 at the worst anchor).
YOLO_FP32_OUTPUT, YOLO_FP32_ANCHOR = 1e-5, 2e-4


@pytest.mark.parametrize("frontend", ["torchscript", "onnx"])
def test_fp32_offline_matches_onnxruntime_with_batch_dropped(tiny, tmp_path, frontend):
    """Conversion and inference also work without network (``unshare -rn``, where the
    machine allows it): nothing is downloaded or installed on the way.
    """
    onnx_path, feeds, expected = tiny
    outputs, record = run_hooks(
        PYTHON, "ncnn", {"frontend": frontend}, onnx_path, feeds, tmp_path, offline_wrapper()
    )
    assert len(outputs) == len(expected)  # every anchor kept as an output, in graph order
    for raw_shape, got, want in zip(record["raw_shapes"], outputs, expected, strict=True):
        assert tuple(raw_shape) == want.shape[1:]  # ncnn drops the batch dimension
        assert rel_l2(got, want) < TINY_FP32
    settings = record["settings"]
    assert settings["use_fp16_storage"] is False and settings["use_fp16_arithmetic"] is False
    assert settings["use_bf16_storage"] is False and settings["frontend"] == frontend


def test_fp16_weights_change_the_result_a_little(tiny, tmp_path):
    onnx_path, feeds, expected = tiny
    outputs, _ = run_hooks(PYTHON, "ncnn", {"fp16_weights": True}, onnx_path, feeds, tmp_path)
    errors = [rel_l2(got, want) for got, want in zip(outputs, expected, strict=True)]
    assert max(errors) > TINY_FP32  # fp16 weights are really stored (pnnx fp16=1)
    assert max(errors) < 1e-2


def test_precision_flags_reach_ncnn(tiny, tmp_path):
    onnx_path, feeds, _ = tiny
    settings = {"fp16_storage": True, "fp16_arithmetic": True, "bf16_storage": True}
    _, record = run_hooks(PYTHON, "ncnn", settings, onnx_path, feeds[:1], tmp_path)
    described = record["settings"]
    assert described["use_fp16_storage"] and described["use_fp16_packed"]
    assert described["use_fp16_arithmetic"]
    assert described["use_bf16_storage"] and described["use_bf16_packed"]


def test_conversion_failure_is_one_line(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    # DFT has no torch translator: the conversion fails with a one-line reason
    graph = helper.make_graph(
        [helper.make_node("DFT", ["x"], ["y"], name="dft")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 2])],
    )
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(AssertionError, match=r"ConversionError: no torch translation: op DFT"):
        run_hooks(PYTHON, "ncnn", {}, path, np.zeros((1, 1, 4), np.float32), tmp_path / "run")


@pytest.mark.slow
def test_yolov8n_fp32_at_the_noise_floor(tmp_path):
    from anpred.interchange.export import export_zoo_model

    export = export_zoo_model("yolov8n")
    feeds = yolo_feeds()  # the bundled image the bounds were measured on
    expected = ort_outputs(export.anchored_path, feeds)
    outputs, _ = run_hooks(PYTHON, "ncnn", {}, export.anchored_path, feeds, tmp_path)
    assert len(outputs) == len(export.anchors)
    errors = [rel_l2(got, want) for got, want in zip(outputs, expected, strict=True)]
    assert errors[0] < YOLO_FP32_OUTPUT  # graph output 0 is the model output
    assert max(errors) < YOLO_FP32_ANCHOR
