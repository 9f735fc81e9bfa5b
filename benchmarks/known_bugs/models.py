"""Small models an ordinary user could have, one per known bug, built deterministically.

``anpred run benchmarks/known_bugs/models.py:FUNCTION`` runs one (each function returns
``(module, example_inputs)``; classes live here because the workers import this file).
The models that exist only as ONNX files are built by ``onnx_models.py``.
``configs/known-bugs.json`` names, per bug, the model that exercises it.
"""

from __future__ import annotations

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
