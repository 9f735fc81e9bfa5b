"""Reduction torch translators: the Reduce* family, ArgMax, ArgMin.

Axes come from the ``axes`` attribute (before opset 18; ReduceSum before 13) or from the
second input (later opsets); no axes means all axes, or the identity with
``noop_with_empty_axes``. A run-time axes input is read back from its tensor (eager only).
A reduction over an empty axis gives the reduction's identity (0 for sums, 1 for
products, -inf/+inf for max/min, -inf for the log-sums), as ONNX specifies; torch's
max/min kernels refuse empty axes, so that case is filled directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor

Reduce = Callable[[Tensor, tuple[int, ...], bool], Tensor]


def _dims(call: NodeCall, x: Tensor, axes: Tensor | None) -> tuple[int, ...] | None:
    """The reduced dimensions (``None``: the identity, with ``noop_with_empty_axes``)."""
    static = call.const(1)
    if static is not None:
        chosen = [int(a) for a in np.asarray(static).reshape(-1)]
    elif axes is not None:
        chosen = [int(a) for a in axes.reshape(-1).tolist()]
    else:
        chosen = [int(a) for a in call.attr("axes", [])]
    if not chosen:
        if call.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(x.ndim))
    return tuple(sorted({a % x.ndim for a in chosen})) if x.ndim else ()


def _identity(x: Tensor, value: float) -> float | int:
    """``value`` in ``x``'s type (an infinity becomes the integer type's extreme)."""
    if x.dtype.is_floating_point or math.isfinite(value):
        return value
    info = torch.iinfo(x.dtype)
    return info.max if value > 0 else info.min


def _reduction(reduce: Reduce, empty: float) -> Callable[..., Tensor]:
    def translate(call: NodeCall, x: Tensor, axes: Tensor | None = None) -> Tensor:
        dims = _dims(call, x, axes)
        if dims is None:
            return x
        keepdims = bool(call.attr("keepdims", 1))
        if any(x.shape[d] == 0 for d in dims):
            shape = [1 if d in dims else n for d, n in enumerate(x.shape)]
            filled = torch.full(shape, _identity(x, empty), dtype=x.dtype)
            kept = [n for d, n in enumerate(x.shape) if d not in dims]
            return filled if keepdims else filled.reshape(kept)
        return reduce(x, dims, keepdims)

    return translate


def _prod(x: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
    """torch.prod reduces one axis at a time (last first, so the others keep their index)."""
    for dim in sorted(dims, reverse=True):
        x = torch.prod(x, dim=dim, keepdim=keepdim)
    return x


_REDUCTIONS: dict[str, tuple[Reduce, float]] = {
    "ReduceMean": (lambda x, d, k: torch.mean(x, dim=d, keepdim=k), math.nan),
    "ReduceSum": (lambda x, d, k: torch.sum(x, dim=d, keepdim=k), 0.0),
    "ReduceMax": (lambda x, d, k: torch.amax(x, dim=d, keepdim=k), -math.inf),
    "ReduceMin": (lambda x, d, k: torch.amin(x, dim=d, keepdim=k), math.inf),
    "ReduceProd": (_prod, 1.0),
    "ReduceL1": (lambda x, d, k: torch.sum(torch.abs(x), dim=d, keepdim=k), 0.0),
    "ReduceL2": (lambda x, d, k: torch.sqrt(torch.sum(x * x, dim=d, keepdim=k)), 0.0),
    "ReduceSumSquare": (lambda x, d, k: torch.sum(x * x, dim=d, keepdim=k), 0.0),
    "ReduceLogSum": (lambda x, d, k: torch.log(torch.sum(x, dim=d, keepdim=k)), -math.inf),
    "ReduceLogSumExp": (lambda x, d, k: torch.logsumexp(x, dim=d, keepdim=k), -math.inf),
}
for _op, (_fn, _empty) in _REDUCTIONS.items():
    register(_LIB, _op)(_reduction(_fn, _empty))


def _arg(pick: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def translate(call: NodeCall, x: Tensor) -> Tensor:
        dim = int(call.attr("axis", 0)) % max(x.ndim, 1)
        keepdim = bool(call.attr("keepdims", 1))
        if call.attr("select_last_index", 0):
            flipped = pick(torch.flip(x, dims=(dim,)), dim=dim, keepdim=keepdim)
            return x.shape[dim] - 1 - flipped
        return pick(x, dim=dim, keepdim=keepdim)

    return translate


register(_LIB, "ArgMax")(_arg(torch.argmax))  # the first maximum, as ONNX
register(_LIB, "ArgMin")(_arg(torch.argmin))
