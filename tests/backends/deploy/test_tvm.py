"""TVM runner: relax ONNX frontend (onnxslim first) compiled with LLVM, run in a relax VM,
driven in the runtime's own environment (skipped when it is not built) through the
framework's conversion step, compared with onnxruntime here.

Tolerances come from measurements with apache-tvm 0.27.0.post1 on this machine (AMD EPYC,
AVX-512, 1 thread), hooks driven as here: fp32 rel L2 vs onnxruntime on the tiny model
<= 1.3e-7 per output; on yolov8n (2 photographs) 7.9e-7 at the output and 1.6e-5 at the
worst anchor (neck.p5). ``ToMixedPrecision`` (float16 inputs to convolutions and matmuls,
float32 accumulation) gives 6e-4 on the tiny model and 1.7e-3 at yolov8n's output (3.4e-2
at neck.p5).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from deploy_hooks import env_python, offline_wrapper, ort_outputs, rel_l2
from drive_converted import drive

PYTHON = env_python("tvm")
pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="the tvm environment is not built"),
    # TVM links its compiled artifact with the system's C++ compiler.
    pytest.mark.skipif(
        not (shutil.which("g++") or shutil.which("c++")), reason="no C++ compiler (g++)"
    ),
]
SPEC = "anpred.backends.deploy.tvm:TvmRunner"
#: fp32 rel L2 bound vs onnxruntime per output on the tiny model (measured <= 1.3e-7).
TINY_FP32 = 1e-5
#: fp32 bounds on yolov8n (measured 7.9e-7 at the output, 1.6e-5 at the worst anchor).
YOLO_FP32_OUTPUT, YOLO_FP32_ANCHOR = 1e-5, 2e-4


def _errors(outputs: list[list[np.ndarray]], expected: list[np.ndarray]) -> list[float]:
    """Worst rel L2 over feeds per graph output (TVM keeps the graph's layout)."""
    return [
        max(rel_l2(per_feed[j], want[i : i + 1]) for i, per_feed in enumerate(outputs))
        for j, want in enumerate(expected)
    ]


def test_fp32_matches_onnxruntime_offline(tiny, tmp_path):
    onnx_path, feeds, expected = tiny
    wrapper = offline_wrapper()  # converts and runs with the network unavailable
    outputs, info = drive(
        Path(PYTHON), SPEC, onnx_path, [f[None] for f in feeds], tmp_path / "run", {},
        prefix=wrapper,
    )  # fmt: skip
    assert info["record"]["ok"] and info["record"]["slimmed"]
    assert info["artifact"].endswith("model.so")
    assert [tuple(s) for s in info["raw_shapes"]] == [(1, *w.shape[1:]) for w in expected]
    assert max(_errors(outputs, expected)) < TINY_FP32


def test_mixed_precision_moves_the_result_a_little(tiny, tmp_path):
    onnx_path, feeds, expected = tiny
    outputs, _ = drive(
        Path(PYTHON), SPEC, onnx_path, [f[None] for f in feeds], tmp_path / "run",
        {"mixed_precision": "float16"}, prefix=offline_wrapper(),
    )  # fmt: skip
    errors = _errors(outputs, expected)
    assert max(errors) > TINY_FP32  # float16 really reaches the kernels
    assert max(errors) < 1e-2


def test_unsupported_mixed_precision_is_a_one_line_conversion_failure(tiny, tmp_path):
    onnx_path, feeds, _ = tiny
    with pytest.raises(AssertionError, match=r"unsupported mixed_precision 'bfloat8'"):
        drive(
            Path(PYTHON), SPEC, onnx_path, [feeds[:1]], tmp_path / "run",
            {"mixed_precision": "bfloat8"},
        )  # fmt: skip


@pytest.mark.slow
def test_yolov8n_fp32_at_the_noise_floor(tmp_path):
    from anpred.interchange.export import export_zoo_model

    export = export_zoo_model("yolov8n")
    feeds = np.random.default_rng(1).random((1, 3, 640, 640), dtype=np.float32)
    expected = ort_outputs(export.anchored_path, feeds)
    outputs, _ = drive(
        Path(PYTHON), SPEC, export.anchored_path, [feeds], tmp_path / "run", {},
        prefix=offline_wrapper(),
    )  # fmt: skip
    errors = _errors(outputs, expected)
    assert len(errors) == len(export.anchors)
    assert errors[0] < YOLO_FP32_OUTPUT  # graph output 0 is the model output
    assert max(errors) < YOLO_FP32_ANCHOR
