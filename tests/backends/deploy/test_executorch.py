"""ExecuTorch runner: torch.export → XNNPACK ``.pte`` of the anchored model and ExecuTorch
inference, hooks driven in the runtime's own environment (skipped when it is not built),
compared with onnxruntime.

Tolerances come from measurements with executorch 1.5.1 / torch 2.14.1 on this machine
(AMD EPYC, AVX-512, 1 thread): fp32 rel L2 vs onnxruntime on the tiny model <= 4e-7 per
output; on yolov8n 6.4e-7 at the output and 1.8e-5 at the worst anchor (neck.p5); fp16
1.0e-3 at the output, 2.7e-2 at the worst anchor.
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

PYTHON = env_python("executorch")
pytestmark = pytest.mark.skipif(PYTHON is None, reason="the executorch environment is not built")

#: fp32 rel L2 bound vs onnxruntime per output on the tiny model (measured <= 4e-7).
TINY_FP32 = 1e-5
#: fp32 bounds on yolov8n (measured 6.4e-7 at the output, 1.8e-5 at the worst anchor).
YOLO_FP32_OUTPUT, YOLO_FP32_ANCHOR = 1e-5, 2e-4


def test_fp32_offline_matches_onnxruntime_in_graph_layout(tiny, tmp_path):
    """Conversion and inference also work without network (``unshare -rn``, where the
    machine allows it): nothing is downloaded or installed on the way.
    """
    onnx_path, feeds, expected = tiny
    outputs, record = run_hooks(
        PYTHON, "executorch", {}, onnx_path, feeds, tmp_path, offline_wrapper()
    )
    assert len(outputs) == len(expected)  # every anchor kept as an output, in graph order
    for raw_shape, got, want in zip(record["raw_shapes"], outputs, expected, strict=True):
        assert tuple(raw_shape) == want[:1].shape  # positional, ONNX shapes (NCHW)
        assert rel_l2(got, want) < TINY_FP32
    assert record["settings"]["dtype"] == "float32"
    assert record["settings"]["delegated_ops"] > 0  # XNNPACK really took operators
    assert set(record["raw_dtypes"]) == {"float32"}


def test_fp16_runs_in_half_precision(tiny, tmp_path):
    onnx_path, feeds, expected = tiny
    outputs, record = run_hooks(
        PYTHON, "executorch", {"dtype": "float16"}, onnx_path, feeds, tmp_path
    )
    errors = [rel_l2(got, want) for got, want in zip(outputs, expected, strict=True)]
    assert max(errors) > TINY_FP32  # the program really computes in float16
    assert max(errors) < 5e-2
    assert set(record["raw_dtypes"]) == {"float32"}  # widened back, exactly


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
        run_hooks(PYTHON, "executorch", {}, path, np.zeros((1, 1, 4), np.float32), tmp_path / "r")


@pytest.mark.slow
def test_yolov8n_fp32_at_the_noise_floor(tmp_path):
    from anpred.interchange.export import export_zoo_model

    export = export_zoo_model("yolov8n")
    feeds = yolo_feeds()  # the bundled image the bounds were measured on
    expected = ort_outputs(export.anchored_path, feeds)
    outputs, _ = run_hooks(PYTHON, "executorch", {}, export.anchored_path, feeds, tmp_path)
    assert len(outputs) == len(export.anchors)
    errors = [rel_l2(got, want) for got, want in zip(outputs, expected, strict=True)]
    assert errors[0] < YOLO_FP32_OUTPUT  # graph output 0 is the model output
    assert max(errors) < YOLO_FP32_ANCHOR
