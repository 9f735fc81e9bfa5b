"""onnxruntime #26324: QLinearConv gives wrong output on CPUs with AVX512-VNNI / AMX-INT8.

https://github.com/microsoft/onnxruntime/issues/26324 (reported on 1.23.1, where 1.20.1 is
correct; the first node of shufflenet-v2-12-int8, a u8 QLinearConv 3->24, 3x3, stride 2).
Needs a CPU with AVX512-VNNI (and AMX-INT8 on the reporter's Xeon). Prints the relative
L2 of the dequantized output against a float64 reference of the same integer arithmetic
(requantized with round-half-to-even); exits 0 when the bug shows (relative L2 > 1e-2:
rounding alone moves an output by at most one step), 1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

THRESHOLD = 1e-2


def model(w: np.ndarray, bias: np.ndarray, scales: dict[str, float], zps: dict[str, int]):
    """One QLinearConv (u8 activations, s8 weights, i32 bias), 3x3, stride 2, pads 1."""
    inits = [
        numpy_helper.from_array(np.array(scales["x"], np.float32), "xs"),
        numpy_helper.from_array(np.array(zps["x"], np.uint8), "xz"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(scales["w"], np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(np.array(scales["y"], np.float32), "ys"),
        numpy_helper.from_array(np.array(zps["y"], np.uint8), "yz"),
        numpy_helper.from_array(bias, "b"),
    ]
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
        kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "qconv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits,
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def reference(x, w, bias, scales, zps) -> np.ndarray:
    """The exact integer convolution, requantized in float64."""
    xi = np.pad(x.astype(np.int64) - zps["x"], ((0, 0), (0, 0), (1, 1), (1, 1)))
    oc, _, kh, kw = w.shape
    oh = ow = 112
    acc = np.zeros((1, oc, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xi[:, :, i : i + 2 * oh : 2, j : j + 2 * ow : 2]
            acc += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    acc += bias.astype(np.int64)[None, :, None, None]
    y = np.round(acc * (scales["x"] * scales["w"] / scales["y"])) + zps["y"]
    return np.clip(y, 0, 255)


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (1, 3, 224, 224), dtype=np.uint8)
    w = rng.integers(-127, 128, (24, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-2000, 2000, 24).astype(np.int32)
    scales = {"x": 0.02, "w": 0.004, "y": 0.05}
    zps = {"x": 114, "y": 128}
    ref = (reference(x, w, bias, scales, zps) - zps["y"]) * scales["y"]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model(w, bias, scales, zps), so,
                                providers=["CPUExecutionProvider"])  # fmt: skip
    y = (sess.run(None, {"x": x})[0].astype(np.float64) - zps["y"]) * scales["y"]
    rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    steps = int(np.abs(y - ref).max() / scales["y"] + 0.5)
    print(f"onnxruntime {ort.__version__}: u8 QLinearConv 3->24 3x3/2, rel L2 vs exact: "
          f"{rel:.3g}, worst error {steps} quantization steps")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
