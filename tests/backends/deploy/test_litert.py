"""LiteRT runner: onnx2tf conversion of the anchored model (onnxslim first, offline) and
LiteRT inference, driven in the runtime's own environment (skipped when it is not built)
through the framework's conversion step, compared with onnxruntime here.

Tolerances come from measurements with onnx2tf 1.28.8 / tensorflow 2.19.0 / ai-edge-litert
2.3.0 on this machine (AMD EPYC Zen 5, AVX-512, 1 thread), hooks driven as here: fp32 rel L2
vs onnxruntime on the tiny model <= 2.1e-7 per output; on yolov8n (2 photographs) 8.9e-7 at
the output and 1.8e-5 at the worst anchor (neck.p5), with or without XNNPACK. onnx2tf's
float16 model (float16 weights, float32 compute, with or without XNNPACK) gives 2.9e-4 on
the tiny model and 6.7e-4 at yolov8n's output (1.4e-2 at neck.p5).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from deploy_hooks import env_python, offline_wrapper, ort_outputs, rel_l2
from drive_converted import drive, graph_layout

from anpred.backends.deploy.litert import (
    CALIBRATION_FILE,
    _output_order,
    _to_layout,
    calibration_data,
)

PYTHON = env_python("litert")
needs_env = pytest.mark.skipif(PYTHON is None, reason="the litert environment is not built")
SPEC = "anpred.backends.deploy.litert:LiteRtRunner"
#: fp32 rel L2 bound vs onnxruntime per output on the tiny model (measured <= 2.1e-7).
TINY_FP32 = 1e-5
#: fp32 bounds on yolov8n (measured 8.9e-7 at the output, 1.8e-5 at the worst anchor).
YOLO_FP32_OUTPUT, YOLO_FP32_ANCHOR = 1e-5, 2e-4
#: What XNNPACK's delegate prints when the interpreter applies it.
XNNPACK_LINE = "Created TensorFlow Lite XNNPACK delegate"


def _errors(outputs: list[list[np.ndarray]], expected: list[np.ndarray]) -> list[float]:
    """Worst rel L2 over feeds per graph output, raw outputs put back in graph layout."""
    return [
        max(
            rel_l2(graph_layout(per_feed[j], want[i : i + 1].shape), want[i : i + 1])
            for i, per_feed in enumerate(outputs)
        )
        for j, want in enumerate(expected)
    ]


@pytest.fixture(scope="module")
def fp32(tiny, tmp_path_factory) -> tuple[list[list[np.ndarray]], dict, list[str]]:
    """The fp32 configuration, converted with the network unavailable where possible."""
    onnx_path, feeds, _ = tiny
    wrapper = offline_wrapper()
    out = tmp_path_factory.mktemp("litert-fp32") / "run"
    outputs, info = drive(
        Path(PYTHON), SPEC, onnx_path, [f[None] for f in feeds], out, {}, prefix=wrapper
    )
    return outputs, info, wrapper


def test_output_order_follows_identity_numbers():
    details = [{"name": n, "index": i} for i, n in enumerate(["Identity", "Identity_10"])]
    details += [{"name": f"Identity_{k}", "index": k + 10} for k in range(1, 10)]
    ordered = [d["name"] for d in _output_order(details)]
    assert ordered == ["Identity", *(f"Identity_{k}" for k in range(1, 11))]
    other = [{"name": "b", "index": 0}, {"name": "a", "index": 1}]
    assert _output_order(other) == other  # not TF's names: the file's order is kept


def test_feeds_are_transposed_to_the_input_layout():
    feed = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    assert _to_layout(feed, (2, 4, 5, 3)).shape == (2, 4, 5, 3)
    assert np.array_equal(_to_layout(feed, (2, 4, 5, 3)), feed.transpose(0, 2, 3, 1))
    assert _to_layout(feed, (2, 3, 4, 5)) is not None  # kept NCHW when the model is
    with pytest.raises(ValueError, match="does not fit"):
        _to_layout(feed, (2, 5, 4, 3))


@needs_env
def test_fp32_matches_onnxruntime_in_nhwc(tiny, fp32):
    _, _, expected = tiny
    outputs, info, _ = fp32
    assert len(outputs[0]) == len(expected)  # every anchor kept, in graph order
    for raw, want in zip(info["raw_shapes"], expected, strict=True):
        if want.ndim == 4:  # onnx2tf returns 4-D anchors channels-last
            assert tuple(raw) == (1, *want.shape[2:], want.shape[1])
    assert info["artifact"].endswith("_float32.tflite")
    assert info["artifact_output_names"][0] == "Identity"
    assert max(_errors(outputs, expected)) < TINY_FP32
    assert XNNPACK_LINE in info["stderr"]


@needs_env
def test_conversion_makes_no_network_access(fp32):
    _, info, wrapper = fp32
    if not wrapper:
        pytest.skip("no network namespace available here (unshare -rn)")
    # converted (not from a cache) in a process without network: onnx2tf read anpred's
    # calibration file instead of downloading its own
    assert info["record"]["cached"] is False and info["record"]["ok"] is True
    written = np.load(Path(info["record"]["folder"]) / CALIBRATION_FILE)
    assert np.array_equal(written, calibration_data())


@needs_env
def test_fp16_model_moves_the_result_a_little(tiny, fp32, tmp_path):
    onnx_path, feeds, expected = tiny
    outputs, info = drive(
        Path(PYTHON), SPEC, onnx_path, [f[None] for f in feeds], tmp_path / "run",
        {"precision": "fp16"}, prefix=offline_wrapper(),
    )  # fmt: skip
    assert info["artifact"].endswith("_float16.tflite")
    # onnx2tf wrote both models in the fp32 configuration's conversion: reused, not redone
    assert info["record"]["cached"] is True
    assert info["record"]["folder"] == fp32[1]["record"]["folder"]
    errors = _errors(outputs, expected)
    assert max(errors) > TINY_FP32  # fp16 weights are really used
    assert max(errors) < 1e-2


@needs_env
def test_without_xnnpack_runs_builtin_kernels(tiny, tmp_path):
    onnx_path, feeds, expected = tiny
    outputs, info = drive(
        Path(PYTHON), SPEC, onnx_path, [f[None] for f in feeds], tmp_path / "run",
        {"xnnpack": False}, prefix=offline_wrapper(),
    )  # fmt: skip
    assert XNNPACK_LINE not in info["stderr"]
    assert max(_errors(outputs, expected)) < TINY_FP32


@needs_env
def test_constant_outputs_stay_outputs(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    # an anchor on an operator that onnxslim folded into an initializer (yolov8n's
    # drill-down): onnx2tf alone drops such an output
    bias = np.arange(5, dtype=np.float32) / 3
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "constant-output",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8]),
            helper.make_tensor_value_info("bias", TensorProto.FLOAT, [5]),
        ],
        [numpy_helper.from_array(bias, "bias")],
    )
    path = tmp_path / "constant.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    feed = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    outputs, _ = drive(Path(PYTHON), SPEC, path, [feed], tmp_path / "run", {})
    assert len(outputs[0]) == 2
    assert np.array_equal(graph_layout(outputs[0][0], feed.shape), np.maximum(feed, 0))
    # kept, with its values; onnx2tf 1.28.8 returns a 1-D constant output permuted as if
    # channels-first → channels-last (measured: [b0, b2, b3, b4, b1]), so order is not checked
    assert np.array_equal(np.sort(outputs[0][1]), bias)


@needs_env
def test_conversion_failure_is_one_line(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    # a custom-domain op: onnx2tf has no converter for it and gives up
    graph = helper.make_graph(
        [helper.make_node("Mystery", ["x"], ["y"], name="mystery", domain="acme")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)]
    )
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    with pytest.raises(AssertionError, match=r"ConversionFailure: .*\n") as err:
        drive(Path(PYTHON), SPEC, path, [np.zeros((1, 3, 8, 8), np.float32)], tmp_path / "run")
    reason = str(err.value).rstrip().splitlines()[-1]  # the driver's uncaught failure
    assert reason.endswith("ModuleNotFoundError: No module named 'onnx2tf.ops.Mystery'")


@needs_env
@pytest.mark.slow
@pytest.mark.parametrize("settings", [{}, {"xnnpack": False}], ids=["xnnpack", "builtin"])
def test_yolov8n_fp32_at_the_noise_floor(tmp_path, settings):
    from anpred.interchange.export import export_zoo_model

    export = export_zoo_model("yolov8n")
    feeds = np.random.default_rng(1).random((1, 3, 640, 640), dtype=np.float32)
    expected = ort_outputs(export.anchored_path, feeds)
    outputs, info = drive(
        Path(PYTHON), SPEC, export.anchored_path, [feeds], tmp_path / "run", settings,
        prefix=offline_wrapper(),
    )  # fmt: skip
    assert info["artifact_output_names"] == ["Identity"] + [f"Identity_{k}" for k in range(1, 9)]
    errors = _errors(outputs, expected)
    assert errors[0] < YOLO_FP32_OUTPUT  # graph output 0 is the model output
    assert max(errors) < YOLO_FP32_ANCHOR
