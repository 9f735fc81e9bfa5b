"""Matrix-product torch translators: Gemm and MatMul."""

from __future__ import annotations

import torch

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor


@register(_LIB, "Gemm")
def gemm(call: NodeCall, a: Tensor, b: Tensor, c: Tensor | None = None) -> Tensor:
    """ONNX Gemm ``alpha * A' @ B' + beta * C`` (``transA``/``transB``, C broadcast)."""
    alpha, beta = float(call.attr("alpha", 1.0)), float(call.attr("beta", 1.0))
    a = a.t() if call.attr("transA", 0) else a
    b = b.t() if call.attr("transB", 0) else b
    if c is None:
        product = torch.mm(a, b)
        return product if alpha == 1.0 else product * alpha
    return torch.addmm(c, a, b, beta=beta, alpha=alpha)


@register(_LIB, "MatMul")
def matmul(call: NodeCall, a: Tensor, b: Tensor) -> Tensor:
    """ONNX MatMul (numpy matmul semantics: batched, broadcast, 1-D operands)."""
    return torch.matmul(a, b)
