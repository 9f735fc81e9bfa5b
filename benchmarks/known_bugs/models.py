"""Small models an ordinary user could have, one per known bug, built deterministically.

``anpred run benchmarks/known_bugs/models.py:FUNCTION`` runs one (each function returns
``(module, example_inputs)``; classes live here because the workers import this file).
:func:`write_onnx` writes the models that exist only as ONNX files (an opset the torch
exporter does not give, a quantized graph) for ``anpred run FILE.onnx``.
``configs/known-bugs.json`` names, per bug, the model that exercises it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn


class ConvAvgPool(nn.Module):
    """A conv block whose downsampling is ``AvgPool2d(3, 2, 1, ceil_mode=True)`` (torch's
    default ``count_include_pad=True``), then a second conv and a classifier head.
    onnxruntime PR #29629 (buggy 1.28.0, fixed 1.30.0) divides the last row/column of
    such a pool by the wrong count.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.conv = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(self.pool(self.stem(x))))


def conv_avgpool_ceil() -> tuple[nn.Module, torch.Tensor]:
    """:class:`ConvAvgPool` on one 3x32x32 input (seeded)."""
    torch.manual_seed(0)
    return ConvAvgPool().eval(), torch.randn(1, 3, 32, 32)


class Conv1x1Affine(nn.Module):
    """A 1x1 convolution to 32 channels followed by a per-channel scale and bias (a
    BatchNorm kept apart from the conv, as an exporter that does not fold it leaves it),
    then ReLU. ncnn #4578 (buggy 1.0.20230223, fixed 1.0.20230517): x86 ``Scale`` on
    elempack-16 blobs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 1, bias=False)
        self.scale = nn.Parameter(torch.rand(1, 32, 1, 1) * 1.5 + 0.5)
        self.bias = nn.Parameter(torch.randn(1, 32, 1, 1))
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x) * self.scale + self.bias)


def conv1x1_affine() -> tuple[nn.Module, torch.Tensor]:
    """:class:`Conv1x1Affine` on one 16x8x8 input (seeded)."""
    torch.manual_seed(0)
    return Conv1x1Affine().eval(), torch.randn(1, 16, 8, 8)


class SmallMlp(nn.Module):
    """A two-layer MLP classifier on a batch of one (the serving case). Under bf16
    autocast its matmuls are small enough for PyTorch 2.0's CPU BLAS fallback, which
    accumulated in bf16 (PyTorch #83863 / #95125, fixed in 2.1.0).
    """

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(1024, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def small_mlp() -> tuple[nn.Module, torch.Tensor]:
    """:class:`SmallMlp` on one 1024-feature input (seeded)."""
    torch.manual_seed(0)
    return SmallMlp().eval(), torch.randn(1, 1024)


class VideoStem(nn.Module):
    """A 3-D convolution stem of a video / volume model: the last (time) axis is strided
    by 3 down to one step. Under bf16 on an AMX CPU, oneDNN's brgemm conv of PyTorch 2.14.1
    gets this shape wrong (PyTorch #169688; 2.0.1 correct).
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(16, 8, 3, stride=(1, 1, 3))
        self.act = nn.ReLU()
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 7 * 7, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.conv(x)))


def video_stem() -> tuple[nn.Module, torch.Tensor]:
    """:class:`VideoStem` on one 16x9x9x3 volume (seeded)."""
    torch.manual_seed(0)
    return VideoStem().eval(), torch.randn(1, 16, 9, 9, 3)


class PointEnergy(nn.Module):
    """Per-point energy of a point set under a learnt 3x3 map, computed column-major:
    ``sum((W @ X^T) ** 2, axis=0)`` for N = 32,769 points. jax/jaxlib 0.10.2's XLA:CPU
    returns a wrong last element for this pattern under ``jit`` (JAX #39103; 0.10.1
    correct).
    """

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.eye(3) + 0.1 * torch.randn(3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(self.weight, x.transpose(0, 1))
        return (y * y).sum(dim=0)


def point_energy() -> tuple[nn.Module, torch.Tensor]:
    """:class:`PointEnergy` on a ramp of 32,769 points along x (the issue's input)."""
    torch.manual_seed(0)
    i = torch.arange(32_769, dtype=torch.float32)
    return PointEnergy().eval(), torch.stack((i, torch.zeros_like(i), torch.zeros_like(i)), 1)


class PositionTable(nn.Module):
    """Adds a learnt table of per-position features, looked up for positions 0..T-1, to a
    sequence (a positional embedding). The lookup's table and indices are both constants:
    the pattern jax/jaxlib 0.8.1 constant-folds wrongly under ``jit`` (JAX #33479; 0.8.2
    correct).
    """

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(4, 6))
        self.register_buffer("positions", torch.arange(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[:, self.positions] * 2.0 + 1.0


def position_table() -> tuple[nn.Module, torch.Tensor]:
    """:class:`PositionTable` on one 4x6 sequence (seeded)."""
    torch.manual_seed(0)
    return PositionTable().eval(), torch.randn(1, 4, 6)


def avgpool_same_onnx() -> bytes:
    """A converted Keras block at opset 19: Conv 3x3 "same", ReLU, then 2x2 stride-1
    ``AveragePool`` padded at the bottom/right only with ``count_include_pad=1`` (what a
    TF "same" pool becomes). onnxruntime #26708 (buggy 1.24.1, fixed 1.25.1).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(8) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node(
            "AveragePool",
            ["r"],
            ["y"],
            kernel_shape=[2, 2],
            strides=[1, 1],
            pads=[0, 0, 1, 1],
            count_include_pad=1,
        ),  # fmt: skip
    ]
    graph = helper.make_graph(
        nodes, "keras_same_avgpool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 19)])
    model.ir_version = 9
    return model.SerializeToString()


#: The models that exist only as ONNX files: name -> builder of the serialized model.
ONNX_MODELS = {"avgpool_same": avgpool_same_onnx}


def write_onnx(name: str, folder: Path) -> Path:
    """Write ONNX model ``name`` (:data:`ONNX_MODELS`) into ``folder``; its path."""
    path = Path(folder) / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ONNX_MODELS[name]())
    return path


def qdq_conv_onnx() -> bytes:
    """A statically quantized conv stem in QDQ form (what onnxruntime's quantizer writes):
    u8 activations, s8 weights, i32 bias, Conv 3->24 3x3 stride 2, ReLU after the
    dequantization. onnxruntime fuses it into a ``QLinearConv``, which 1.23.1/1.24.1 get
    wrong on CPUs with AVX512-VNNI / AMX-INT8 (onnxruntime #26324; 1.25.1 correct).
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    xs, ws, ys = 0.02, 0.004, 0.05
    w = rng.integers(-127, 128, (24, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-2000, 2000, 24).astype(np.int32)
    inits = [
        numpy_helper.from_array(np.array(xs, np.float32), "xs"),
        numpy_helper.from_array(np.array(114, np.uint8), "xz"),
        numpy_helper.from_array(w, "wq"),
        numpy_helper.from_array(np.array(ws, np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(bias, "bq"),
        numpy_helper.from_array(np.array(xs * ws, np.float32), "bs"),
        numpy_helper.from_array(np.array(0, np.int32), "bz"),
        numpy_helper.from_array(np.array(ys, np.float32), "ys"),
        numpy_helper.from_array(np.array(128, np.uint8), "yz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
        helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"]),
        helper.make_node(
            "Conv", ["xd", "wd", "bd"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4
        ),  # fmt: skip
        helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["cd"]),
        helper.make_node("Relu", ["cd"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "qdq_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 32, 32])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


ONNX_MODELS["qdq_conv"] = qdq_conv_onnx


if __name__ == "__main__":  # python models.py NAME FOLDER: write one ONNX model
    print(write_onnx(sys.argv[1], Path(sys.argv[2])))
