"""onnxruntime PR #29629: AveragePool with ceil_mode=1 and count_include_pad=1 (opset 7-18).

https://github.com/microsoft/onnxruntime/pull/29629 (the CPU side of
pytorch/pytorch#183528). The float MLAS path divides every window by the full kernel size;
with ``ceil_mode=1`` the output grid gains a trailing window that runs past the padded
input, and the phantom cells it counts make the border averages too small. The model is
what ``torch.onnx.export`` makes of ``nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)``
(``count_include_pad`` is torch's default) at opset 17. Prints the relative L2 against a
float64 NumPy reference with PyTorch's (and ONNX's) semantics; exits 0 when the bug shows
(relative L2 > 1e-4), 1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

THRESHOLD = 1e-4  # fp32 averaging: ~1e-7; the bug: tens of percent on the last row/column
K, S, P = 3, 2, 1


def model(shape: tuple[int, ...]) -> bytes:
    """AveragePool 3x3, stride 2, pads 1, ceil_mode=1, count_include_pad=1 (opset 17)."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[K, K], strides=[S, S],
                            pads=[P] * 4, ceil_mode=1, count_include_pad=1)  # fmt: skip
    graph = helper.make_graph(
        [node], "avgpool_ceil",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def reference(x: np.ndarray) -> np.ndarray:
    """PyTorch's avg_pool2d(count_include_pad=True, ceil_mode=True), in float64."""
    n, c, h, w = x.shape
    out = [-(-(d + 2 * P - K) // S) + 1 for d in (h, w)]
    out = [o - 1 if (o - 1) * S >= d + P else o for o, d in zip(out, (h, w), strict=True)]
    y = np.zeros((n, c, *out))
    for i in range(out[0]):
        hs = i * S - P
        he = min(hs + K, h + P)
        for j in range(out[1]):
            ws = j * S - P
            we = min(ws + K, w + P)
            win = x[:, :, max(hs, 0) : min(he, h), max(ws, 0) : min(we, w)].astype(np.float64)
            y[:, :, i, j] = win.sum(axis=(2, 3)) / ((he - hs) * (we - ws))
    return y


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    x = np.random.default_rng(0).standard_normal((1, 8, 16, 16)).astype(np.float32)
    ref = reference(x)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model(x.shape), so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"x": x})[0].astype(np.float64)
    rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    print(f"onnxruntime {ort.__version__}: AveragePool(ceil_mode=1, count_include_pad=1) "
          f"opset 17, rel L2 vs fp64: {rel:.3g} (shape {y.shape})")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
