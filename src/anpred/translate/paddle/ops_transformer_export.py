"""Ops of transformer exports outside ONNX's float32 node tests: cumulative sums and
products, Einsum, Trilu, OneHot, NonZero, GlobalLpPool and the bitwise family.

(Their node tests use float64 or integer tensors only, so the conformance suite does not
run them; ``tests/translate/paddle`` checks them against ONNX's reference evaluator.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.translate.paddle.static_values import optional_value, static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _axis(call: NodeCall, x: Tensor, axis: Tensor) -> int:
    return int(np.asarray(static_value(call, 1, "axis", axis)).reshape(-1)[0]) % x.ndim


def _cumulative(call: NodeCall, x: Tensor, axis: int, fn: Any, identity: float) -> Tensor:
    """``fn`` along ``axis`` with ONNX's ``reverse`` and ``exclusive`` (shifted, identity
    first) attributes.
    """
    if call.attr("reverse", 0):
        x = paddle.flip(x, [axis])
    y = fn(x, axis)
    if call.attr("exclusive", 0):
        length = int(x.shape[axis])
        head = paddle.full_like(paddle.slice(y, [axis], [0], [1]), identity)
        y = paddle.concat([head, paddle.slice(y, [axis], [0], [length - 1])], axis=axis)
    if call.attr("reverse", 0):
        y = paddle.flip(y, [axis])
    return paddle.cast(y, x.dtype)


@register("paddle", "CumSum", since=11)
def cumsum(call: NodeCall, x: Tensor, axis: Tensor) -> Tensor:
    """ONNX CumSum along ``axis`` (an input): ``paddle.cumsum``; ``exclusive``, ``reverse``."""
    return _cumulative(call, x, _axis(call, x, axis), lambda v, a: paddle.cumsum(v, a), 0.0)


@register("paddle", "CumProd", since=26)
def cumprod(call: NodeCall, x: Tensor, axis: Tensor) -> Tensor:
    """ONNX CumProd along ``axis``: ``paddle.cumprod``; ``exclusive``, ``reverse``."""
    return _cumulative(call, x, _axis(call, x, axis), lambda v, a: paddle.cumprod(v, a), 1.0)


@register("paddle", "Einsum", since=12)
def einsum(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Einsum (numpy's equation syntax): ``paddle.einsum``."""
    return paddle.einsum(str(call.attr("equation")).replace(" ", ""), *inputs)


@register("paddle", "Trilu", since=14)
def trilu(call: NodeCall, x: Tensor, k: Tensor = None) -> Tensor:
    """ONNX Trilu: the upper (default) or lower triangle from diagonal ``k``."""
    value = optional_value(call, 1, k)
    offset = 0 if value is None else int(np.asarray(value).reshape(-1)[0])
    return paddle.triu(x, offset) if call.attr("upper", 1) else paddle.tril(x, offset)


@register("paddle", "OneHot", since=9)
def one_hot(call: NodeCall, indices: Tensor, depth: Tensor, values: Tensor) -> Tensor:
    """ONNX OneHot: ``values[1]`` at each index along the new ``axis``, ``values[0]`` else.

    Composed (``F.one_hot`` rejects out-of-range indices, which ONNX maps to all-off
    rows): the indices compared with ``paddle.arange(depth)``.
    """
    count = int(np.asarray(static_value(call, 1, "depth", depth)).reshape(-1)[0])
    index = paddle.cast(indices, "int64")
    index = paddle.where(index < 0, index + count, index)
    rank = index.ndim + 1
    axis = int(call.attr("axis", -1)) % rank
    shape = [1] * rank
    shape[axis] = count
    hot = paddle.unsqueeze(index, axis) == paddle.reshape(paddle.arange(count), shape)
    return paddle.where(hot, values[1], values[0])


@register("paddle", "NonZero", since=9)
def non_zero(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX NonZero: indices of the non-zero elements, one row per axis (int64)."""
    if x.ndim == 0:
        x = paddle.reshape(x, [1])
        return paddle.zeros([0, int(paddle.nonzero(x).shape[0])], dtype="int64")
    return paddle.transpose(paddle.nonzero(x), [1, 0])


@register("paddle", "GlobalLpPool", since=2)
def global_lp_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX GlobalLpPool: the p-norm over all spatial axes, kept as size-1 axes."""
    p = float(call.attr("p", 2))
    axes = list(range(2, x.ndim))
    total = paddle.sum(paddle.pow(paddle.abs(x), p), axis=axes, keepdim=True)
    # a tensor exponent: paddle.pow takes a Python float exponent as float32 (1/3: 1e-8 off)
    return paddle.pow(total, paddle.full([], 1 / p, dtype=total.dtype))


for _op, _fn in (("BitwiseAnd", paddle.bitwise_and), ("BitwiseOr", paddle.bitwise_or),
                 ("BitwiseXor", paddle.bitwise_xor)):  # fmt: skip

    def _binary(call: NodeCall, a: Tensor, b: Tensor, _fn: Any = _fn) -> Tensor:
        return _fn(a, b)

    _binary.__doc__ = f"ONNX {_op}: ``paddle.{_fn.__name__}``."
    register("paddle", _op, since=18)(_binary)


@register("paddle", "BitwiseNot", since=18)
def bitwise_not(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX BitwiseNot: ``paddle.bitwise_not``."""
    return paddle.bitwise_not(x)


@register("paddle", "BitShift", since=11)
def bit_shift(call: NodeCall, x: Tensor, y: Tensor) -> Tensor:
    """ONNX BitShift (unsigned): ``paddle.bitwise_left_shift`` / ``right_shift``."""
    if call.attr("direction") == "LEFT":
        return paddle.bitwise_left_shift(x, y)
    return paddle.bitwise_right_shift(x, y, is_arithmetic=False)
