"""The native torch runner's configurations on a tiny zoo-free module (imports torch only).

Tolerances, measured on this module (torch 2.14, 2-core AVX2 CPU):
- ``torch.compile`` vs eager: relative L2 up to 3.3e-7 (fp32 reassociation in inductor's
  kernels); ``COMPILE_TOL`` = 1e-5 leaves 30x room and is far below any bf16 effect.
- autocast bf16 vs eager: 3.6e-3 .. 4.9e-3 (bf16 unit roundoff 2^-9 = 2.0e-3);
  ``BF16_RANGE`` is the 1e-3..1e-2 band of a bf16 conv/matmul.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from anpred.backends.torch_runner import NativeExecution
from anpred.errors import UsageError
from anpred.zoo.spec import Anchor

COMPILE_TOL = 1e-5
BF16_RANGE = (1e-3, 1e-2)
ANCHORS = [Anchor("p1", "b1", "backbone"), Anchor("p2", "b2", "backbone")]


class _Block(torch.nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(c_in, c_out, 3, padding=1)
        self.act = torch.nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv(x))


class _Net(torch.nn.Module):
    """Two conv blocks and a linear head; returns a tuple, like YOLO's (output, extras)."""

    def __init__(self) -> None:
        super().__init__()
        self.b1 = _Block(3, 16)
        self.b2 = _Block(16, 16)
        self.head = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.b2(self.b1(x))
        return self.head(y.flatten(1)), y


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return _Net().eval()


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


@pytest.fixture(scope="module")
def feed() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def eager(feed: np.ndarray) -> dict[str, np.ndarray]:
    return NativeExecution(_net(), ANCHORS).anchored(feed)


def test_eager_captures_anchors_and_isolates(feed, eager) -> None:
    run = NativeExecution(_net(), ANCHORS)
    assert list(eager) == ["output", "p1", "p2"]
    np.testing.assert_array_equal(run.plain(feed), eager["output"])
    isolated = run.isolated(feed, {"p1": np.ones_like(eager["p1"]), "p2": eager["p2"]})
    np.testing.assert_array_equal(isolated["p1"], eager["p1"])  # what b1 computed
    assert np.abs(isolated["p2"] - eager["p2"]).max() > 0.1  # b2 ran on the fed ones
    again = run.isolated(feed, {"p1": eager["p1"], "p2": eager["p2"]})
    np.testing.assert_array_equal(again["output"], eager["output"])  # hooks were removed
    np.testing.assert_array_equal(run.anchored(feed)["p2"], eager["p2"])


def test_compile_keeps_anchors_without_recompiling(feed, eager) -> None:
    torch._dynamo.reset()
    counters.clear()
    run = NativeExecution(_net(), ANCHORS, compile=True)
    for _ in range(2):
        captured = run.anchored(feed)
        plain = run.plain(feed)
    assert list(captured) == list(eager)
    assert all(_rel(captured[k], eager[k]) <= COMPILE_TOL for k in eager)
    np.testing.assert_array_equal(plain, captured["output"])  # no observer effect here
    fed = {"p1": np.ones_like(eager["p1"]), "p2": eager["p2"]}
    isolated = run.isolated(feed, fed)
    run.isolated(feed, fed)
    reference = NativeExecution(_net(), ANCHORS).isolated(feed, fed)
    assert all(_rel(isolated[k], reference[k]) <= COMPILE_TOL for k in reference)
    # anchored, plain and isolation: one graph each, whatever the number of calls
    assert counters["stats"]["unique_graphs"] == 3


def test_autocast_bf16_computes_in_bf16(feed, eager) -> None:
    run = NativeExecution(_net(), ANCHORS, autocast="bfloat16")
    captured = run.anchored(feed)
    assert run.dtypes_seen["bfloat16"] == 3  # output, p1, p2 all came out of bf16 kernels
    assert all(v.dtype == np.float32 for v in captured.values())  # widened for capture
    errors = [_rel(captured[k], eager[k]) for k in eager]
    assert all(BF16_RANGE[0] <= e <= BF16_RANGE[1] for e in errors), errors


def test_autocast_needs_float32() -> None:
    with pytest.raises(UsageError, match="float32"):
        NativeExecution(_net().double(), ANCHORS, dtype=torch.float64, autocast="bfloat16")
    with pytest.raises(UsageError, match="autocast"):
        NativeExecution(_net(), ANCHORS, autocast="float16")
