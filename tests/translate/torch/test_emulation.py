"""Ideal reduced-precision arithmetic emulated in float64 (the precision classes' references)."""

from __future__ import annotations

import pytest
import torch

from anpred.errors import UsageError
from anpred.translate.torch.emulation import (
    RoundingMode,
    check_emulation,
    round_weights,
    rounder,
)


def _representable(x: torch.Tensor, dtype: torch.dtype) -> bool:
    return bool(torch.equal(x, x.to(dtype).to(x.dtype)))


def test_rounding_is_round_to_nearest_and_idempotent() -> None:
    x = torch.randn(10_000, dtype=torch.float64)
    for fmt, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        y = rounder(fmt)(x)
        assert _representable(y, dtype) and torch.equal(rounder(fmt)(y), y)
        # round to nearest: at most half a unit in the last place (relative 2^-8, 2^-11)
        bound = 2.0**-8 if fmt == "bf16" else 2.0**-11
        assert float(((y - x).abs() / x.abs()).max()) <= bound * (1 + 1e-12)


def test_tf32_keeps_ten_mantissa_bits() -> None:
    x = torch.randn(10_000, dtype=torch.float64)
    y = rounder("tf32")(x)
    bits = y.to(torch.float32).view(torch.int32)
    assert int((bits & ((1 << 13) - 1)).abs().max()) == 0
    assert float(((y - x).abs() / x.abs()).max()) <= 2.0**-11 * (1 + 1e-6)
    special = torch.tensor([float("inf"), float("-inf"), float("nan")], dtype=torch.float64)
    out = rounder("tf32")(special)
    assert torch.isinf(out[:2]).all() and torch.isnan(out[2])


def test_every_operator_result_and_matmul_operand_is_rounded() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4)
    ).double()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    seen = []
    hooks = [m.register_forward_hook(lambda _m, _i, o: seen.append(o)) for m in model]
    with torch.no_grad(), RoundingMode("bf16") as mode:
        y = model(x)
    for h in hooks:
        h.remove()
    assert all(_representable(o, torch.bfloat16) for o in seen)
    assert mode.calls >= 4
    # what the mode computes: the conv on bf16 operands, rounded; relu; linear likewise
    r = rounder("bf16")
    with torch.no_grad():
        conv = r(torch.nn.functional.conv2d(r(x), r(model[0].weight), r(model[0].bias)))
        hidden = r(torch.relu(conv)).flatten(1)
        expected = r(torch.nn.functional.linear(r(hidden), r(model[3].weight), r(model[3].bias)))
    assert torch.equal(y, expected)


def test_views_keep_aliasing_and_in_place_results_are_rounded() -> None:
    x = torch.randn(4, 4, dtype=torch.float64)
    with torch.no_grad(), RoundingMode("fp16"):
        view = x[1]
        view.mul_(3.0)
    assert x[1].data_ptr() == view.data_ptr()
    assert _representable(x[1], torch.float16)


def test_the_ideal_bf16_error_is_that_of_real_bf16_arithmetic() -> None:
    # torch.autocast computes conv/linear in bf16 with fp32 accumulation: its error against
    # fp64 is that of correct bf16 arithmetic; measured 1.0-1.1x the ideal's on this net
    torch.manual_seed(1)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1),
        torch.nn.Sigmoid(),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 16 * 16, 10),
    ).eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        exact = net.double()(x.double())
        with RoundingMode("bf16"):
            ideal = net(x.double())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            real = net.float()(x).double()

    def rel(a: torch.Tensor) -> float:
        return float((a - exact).norm() / exact.norm())

    assert 1e-3 < rel(ideal) < 1e-2
    assert 0.5 < rel(real) / rel(ideal) < 2.0


def test_weights_scope_rounds_parameters_only() -> None:
    layer = torch.nn.Linear(16, 4).double()
    assert round_weights(layer, "fp16") == 2
    assert _representable(layer.weight, torch.float16)


def test_emulation_settings_are_checked() -> None:
    assert check_emulation({}) == (None, "all")
    assert check_emulation({"dtype": "float64", "emulate": "bf16"}) == ("bf16", "all")
    with pytest.raises(UsageError, match="float64"):
        check_emulation({"emulate": "bf16"})
    with pytest.raises(UsageError, match="cannot emulate"):
        check_emulation({"dtype": "float64", "emulate": "fp8"})
    with pytest.raises(UsageError, match="scope"):
        RoundingMode("bf16", "weights")
