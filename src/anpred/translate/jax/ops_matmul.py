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


@register("QLinearMatMul")
def qlinear_matmul(
    call: NodeCall, a: Any, a_scale: Any, a_zero: Any, b: Any, b_scale: Any, b_zero: Any,
    y_scale: Any, y_zero: Any,
) -> Any:  # fmt: skip
    """ONNX QLinearMatMul: the integer product of the zero-point-shifted operands
    (``jnp.matmul`` in int32, exact for int8/uint8 operands), scaled by
    ``a_scale * b_scale / y_scale``, rounded half to even, shifted by ``y_zero_point`` and
    saturated to its type.
    """
    product = jnp.matmul(a.astype(jnp.int32) - a_zero.astype(jnp.int32),
                         b.astype(jnp.int32) - b_zero.astype(jnp.int32))  # fmt: skip
    factor = a_scale * b_scale / y_scale
    y = jnp.round(product.astype(factor.dtype) * factor) + y_zero.astype(factor.dtype)
    info = jnp.iinfo(y_zero.dtype)
    return jnp.clip(y, info.min, info.max).astype(y_zero.dtype)
