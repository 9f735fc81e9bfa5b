"""onnxruntime #26708 / PR #27375: AveragePool (opset 19+) divides by the wrong count.

https://github.com/microsoft/onnxruntime/issues/26708, fixed by
https://github.com/microsoft/onnxruntime/pull/27375 (buggy 1.25.1, fixed 1.26.0). With
``count_include_pad=1`` and asymmetric pads (bottom/right only, what a TF-style "same" pad
or onnxruntime's own Pad+AveragePool fusion gives), the opset-19 CPU kernel clamps the
window's end with the wrong pad index, so the bottom row is divided by too few cells. The
model: a 2x2 stride-1 ``AveragePool`` padded at the bottom/right only (``pads=[0,0,1,1]``,
what a converted TF/Keras "same" pooling is), opset 19. Prints the relative L2 against a
float64 NumPy reference; exits 0 when the bug shows (relative L2 > 1e-4), 1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

THRESHOLD = 1e-4  # fp32 averaging: ~1e-7; the bug: percent-level at the last row


def model(shape: tuple[int, ...]) -> bytes:
    """AveragePool 2x2, stride 1, pads bottom/right 1, count_include_pad=1 (opset 19)."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 1],
                            pads=[0, 0, 1, 1], count_include_pad=1)  # fmt: skip
    graph = helper.make_graph(
        [node], "avgpool_same",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 19)])
    m.ir_version = 9
    return m.SerializeToString()


def reference(x: np.ndarray) -> np.ndarray:
    """The pool in float64, padding counted."""
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (0, 1), (0, 1)))
    return (p[:, :, :-1, :-1] + p[:, :, 1:, :-1] + p[:, :, :-1, 1:] + p[:, :, 1:, 1:]) / 4.0


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    ref = reference(x)
    errors = {}
    for level in ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL"):
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(model(x.shape), so, providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0].astype(np.float64)
        errors[level] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    rel = max(errors.values())
    print(f"onnxruntime {ort.__version__}: AveragePool(pads=[0,0,1,1], count_include_pad=1), "
          "rel L2 vs "
          f"fp64: optimized {errors['ORT_ENABLE_ALL']:.3g}, "
          f"unoptimized {errors['ORT_DISABLE_ALL']:.3g}")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
