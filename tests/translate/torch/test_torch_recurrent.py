"""torch's LSTM/GRU translators: the fused kernels where they apply, ONNX's recurrence else.

Both paths must agree: in float64 the fused ``torch.lstm`` / ``torch.gru`` and the unrolled
recurrence differ only by summation order (measured 2e-16 relative here; the limit leaves
~50x).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from anpred.translate import recurrent
from anpred.translate.registry import NodeCall
from anpred.translate.torch import make_adapter
from anpred.translate.torch import ops_recurrent as ops

make_adapter()
_LIMIT = 1e-14


def _inputs(gates: int, dirs: int, layout: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(gates * 10 + dirs + layout)
    seq, batch, size, hidden = 5, 2, 3, 4
    x = rng.standard_normal((batch, seq, size) if layout else (seq, batch, size))
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    arrays = [x, rng.standard_normal((dirs, gates * hidden, size)),
              rng.standard_normal((dirs, gates * hidden, hidden)),
              rng.standard_normal((dirs, 2 * gates * hidden)), None,
              rng.standard_normal(state)]  # fmt: skip
    if gates == 4:
        arrays.append(rng.standard_normal(state))
    return [None if a is None else torch.from_numpy(a) for a in arrays]


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_fused_kernel_matches_the_recurrence(op: str, layout: int, direction: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    gates, translate, generic = ((4, ops.lstm, recurrent.lstm) if op == "LSTM"
                                 else (3, ops.gru, recurrent.gru))  # fmt: skip
    dirs = 2 if direction == "bidirectional" else 1
    attrs = {"hidden_size": 4, "direction": direction, "layout": layout,
             "linear_before_reset": 1}  # fmt: skip
    call = NodeCall(op, "n", attrs, 14)
    inputs = _inputs(gates, dirs, layout)
    fused_calls = []
    real = ops._run_fused
    monkeypatch.setattr(ops, "_run_fused", lambda *a: fused_calls.append(1) or real(*a))
    got = translate(call, *inputs)
    assert fused_calls, "the fused kernel was not used"
    want = generic(call, ops.KERNELS, *inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        assert float((g - w).abs().max() / w.abs().max()) < _LIMIT


def test_peepholes_and_clip_take_the_recurrence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "_run_fused", lambda *a: pytest.fail("fused kernel used"))
    inputs = _inputs(4, 1, 0) + [torch.ones(1, 12, dtype=torch.float64)]
    y, _, _ = ops.lstm(NodeCall("LSTM", "n", {"hidden_size": 4}, 14), *inputs)
    assert y.shape == (5, 1, 2, 4)
    clipped = NodeCall("GRU", "n", {"hidden_size": 4, "clip": 0.5, "linear_before_reset": 1}, 14)
    y, _ = ops.gru(clipped, *_inputs(3, 1, 0))
    assert y.shape == (5, 1, 2, 4)
