"""Reductions (mean, sum, max, min, prod, log-sum-exp, L1, L2, sum of squares, log-sum).

Axes come from the ``axes`` attribute (ReduceMean/Max/Min before opset 18, ReduceSum
before 13) or from the second input (from those opsets on); an absent or empty axes list
reduces everything, unless ``noop_with_empty_axes`` is set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.translate.paddle.static_values import ints, static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any

_REDUCERS = {
    "ReduceMean": (paddle.mean, 18),
    "ReduceSum": (paddle.sum, 13),
    "ReduceMax": (paddle.max, 18),
    "ReduceMin": (paddle.min, 18),
    "ReduceProd": (paddle.prod, 18),
    "ReduceLogSumExp": (paddle.logsumexp, 18),
    "ReduceL1": (lambda x, **kw: paddle.sum(paddle.abs(x), **kw), 18),
    "ReduceL2": (lambda x, **kw: paddle.sqrt(paddle.sum(paddle.square(x), **kw)), 18),
    "ReduceSumSquare": (lambda x, **kw: paddle.sum(paddle.square(x), **kw), 18),
    "ReduceLogSum": (lambda x, **kw: paddle.log(paddle.sum(x, **kw)), 18),
}


def _axes_from_attribute(call: NodeCall) -> list[int] | None:
    axes = call.attr("axes")
    return None if axes is None else [int(a) for a in axes]


def _axes_from_input(call: NodeCall, axes: Tensor) -> list[int] | None:
    if axes is None:
        return None
    return ints(static_value(call, 1, "axes", axes))


#: The value ONNX gives a max / min over an empty set (paddle refuses to reduce it).
_EMPTY_IDENTITY = {"ReduceMax": -np.inf, "ReduceMin": np.inf}


def _empty(call: NodeCall, x: Tensor, axes: list[int] | None, keepdims: bool) -> Tensor | None:
    """``paddle.full`` of the reduction's identity when it reduces an empty axis, else None."""
    shape = list(x.shape)
    chosen = range(len(shape)) if not axes else [a % len(shape) for a in axes]
    if call.op_type not in _EMPTY_IDENTITY or all(shape[a] for a in chosen):
        return None
    out = [1 if i in chosen else d for i, d in enumerate(shape) if keepdims or i not in chosen]
    return paddle.full(out, _EMPTY_IDENTITY[call.op_type], dtype=x.dtype)


def _reduce(call: NodeCall, fn: Any, x: Tensor, axes: list[int] | None) -> Tensor:
    keepdims = bool(call.attr("keepdims", 1))
    if not axes and call.attr("noop_with_empty_axes", 0):
        return x
    empty = _empty(call, x, axes, keepdims)
    if empty is not None:
        return empty
    return fn(x, axis=axes or None, keepdim=keepdims)


def _register(op_type: str, fn: Any, input_since: int) -> None:
    def with_attribute(call: NodeCall, x: Tensor) -> Tensor:
        return _reduce(call, fn, x, _axes_from_attribute(call))

    def with_input(call: NodeCall, x: Tensor, axes: Tensor = None) -> Tensor:
        return _reduce(call, fn, x, _axes_from_input(call, axes))

    for translate, kind, since in (
        (with_attribute, "axes attribute", 1),
        (with_input, "axes input", input_since),
    ):
        translate.__name__ = f"{op_type.lower()}_{since}"
        translate.__doc__ = f"ONNX {op_type} ({kind}, from opset {since})."
        register("paddle", op_type, since=since)(translate)


for _op_type, (_fn, _since) in _REDUCERS.items():
    _register(_op_type, _fn, _since)
