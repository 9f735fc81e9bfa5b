"""Reduction ONNX ops: ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp,
ArgMax/ArgMin.

Axes come as an attribute (ReduceSum before opset 13, the others before 18) or as the
second input (later opsets); both forms are accepted whatever the opset.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from anpred.translate.jax.numerics import index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import axes_of, normalize_axes
from anpred.translate.registry import NodeCall


def _extreme(dtype: Any, lowest: bool) -> Any:
    """The identity of max (``lowest``) or min: -inf/+inf, or the integer type's bound."""
    if jnp.issubdtype(dtype, jnp.floating):
        return -jnp.inf if lowest else jnp.inf
    if dtype == jnp.bool_:
        return not lowest
    info = jnp.iinfo(dtype)
    return info.min if lowest else info.max


_REDUCTIONS = {
    "ReduceMean": jnp.mean,
    "ReduceSum": jnp.sum,
    # an empty set reduces to the identity (-inf for max, +inf for min), as ONNX specifies
    "ReduceMax": lambda x, **kw: jnp.max(x, initial=_extreme(x.dtype, True), **kw),
    "ReduceMin": lambda x, **kw: jnp.min(x, initial=_extreme(x.dtype, False), **kw),
    "ReduceProd": jnp.prod,
}


def _reduce(fn: Any) -> Any:
    def translate(call: NodeCall, x: Any, axes: Any = None) -> Any:
        return _apply(call, x, axes, fn)

    return translate


def _apply(call: NodeCall, x: Any, axes_tensor: Any, fn: Any) -> Any:
    axes = axes_of(call, 1, axes_tensor)
    if not axes:
        if call.attr("noop_with_empty_axes", 0):
            return x
        axes = list(range(x.ndim))
    keepdims = bool(call.attr("keepdims", 1))
    return fn(x, axis=tuple(normalize_axes(axes, x.ndim)), keepdims=keepdims)


for _op, _fn in _REDUCTIONS.items():
    register(_op)(_reduce(_fn))

_MORE_REDUCTIONS = {
    "ReduceL1": lambda x, **kw: jnp.sum(jnp.abs(x), **kw),
    "ReduceSumSquare": lambda x, **kw: jnp.sum(x * x, **kw),
    "ReduceLogSum": lambda x, **kw: jnp.log(jnp.sum(x, **kw)),
    "ReduceLogSumExp": jax.nn.logsumexp,
}
for _op, _fn in _MORE_REDUCTIONS.items():
    register(_op)(_reduce(_fn))


@register("ReduceL2")
def reduce_l2(call: NodeCall, x: Any, axes: Any = None) -> Any:
    """Euclidean norm over the axes."""
    return jnp.sqrt(_apply(call, x * x, axes, jnp.sum))


def _arg(call: NodeCall, x: Any, fn: Any) -> Any:
    axis = int(call.attr("axis", 0))
    axis = axis + x.ndim if axis < 0 else axis
    keepdims = bool(call.attr("keepdims", 1))
    if call.attr("select_last_index", 0):
        flipped = fn(jnp.flip(x, axis=axis), axis=axis, keepdims=keepdims)
        return (x.shape[axis] - 1 - flipped).astype(index_dtype())
    return fn(x, axis=axis, keepdims=keepdims).astype(index_dtype())


@register("ArgMax")
def argmax(call: NodeCall, x: Any) -> Any:
    """Index of the maximum along ``axis`` (first or last occurrence)."""
    return _arg(call, x, jnp.argmax)


@register("ArgMin")
def argmin(call: NodeCall, x: Any) -> Any:
    """Index of the minimum along ``axis`` (first or last occurrence)."""
    return _arg(call, x, jnp.argmin)
