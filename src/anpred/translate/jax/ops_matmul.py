"""Matrix-product ONNX ops: MatMul (batched, broadcast) and Gemm."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from anpred.translate.jax.numerics import current
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


@register("MatMul")
def matmul(call: NodeCall, a: Any, b: Any) -> Any:
    """NumPy-style matrix product (1-D promotion, batch broadcasting)."""
    return jnp.matmul(a, b, precision=current().precision)


@register("Gemm")
def gemm(call: NodeCall, a: Any, b: Any, c: Any = None) -> Any:
    """``alpha * A' @ B' + beta * C`` with optional transposes of A and B."""
    if call.attr("transA", 0):
        a = a.T
    if call.attr("transB", 0):
        b = b.T
    y = jnp.matmul(a, b, precision=current().precision)
    alpha = float(call.attr("alpha", 1.0))
    beta = float(call.attr("beta", 1.0))
    if alpha != 1.0:
        y = alpha * y
    if c is not None and beta != 0.0:
        y = y + (c if beta == 1.0 else beta * c)
    return y
