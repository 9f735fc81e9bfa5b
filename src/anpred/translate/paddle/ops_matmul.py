"""Matrix products: Gemm and MatMul, with ``paddle.matmul`` (transposes done by the kernel)."""

from __future__ import annotations

from typing import Any

import paddle

from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "Gemm")
def gemm(call: NodeCall, a: Tensor, b: Tensor, c: Tensor = None) -> Tensor:
    """ONNX Gemm: alpha * op(A) @ op(B) + beta * C, with transA / transB and optional C."""
    alpha = float(call.attr("alpha", 1.0))
    beta = float(call.attr("beta", 1.0))
    result = paddle.matmul(
        a,
        b,
        transpose_x=bool(call.attr("transA", 0)),
        transpose_y=bool(call.attr("transB", 0)),
    )
    if alpha != 1.0:
        result = paddle.scale(result, scale=alpha)
    if c is None or beta == 0.0:
        return result
    if beta != 1.0:
        c = paddle.scale(c, scale=beta)
    return paddle.add(result, c)


@register("paddle", "MatMul")
def matmul(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX MatMul (NumPy semantics: batched, broadcast, 1-D operands)."""
    return paddle.matmul(a, b)
