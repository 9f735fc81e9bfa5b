"""Element-wise ONNX ops: arithmetic, math functions, comparisons, Where, Cast."""

from __future__ import annotations

import functools
from typing import Any

import jax.numpy as jnp
from jax import lax

from anpred.translate.jax.numerics import onnx_dtype
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall

_BINARY = {
    "Add": jnp.add,
    "Sub": jnp.subtract,
    "Mul": jnp.multiply,
    "Equal": jnp.equal,
    "Greater": jnp.greater,
    "Less": jnp.less,
    "GreaterOrEqual": jnp.greater_equal,
    "LessOrEqual": jnp.less_equal,
    "And": jnp.logical_and,
    "Or": jnp.logical_or,
    "Xor": jnp.logical_xor,
}

_UNARY = {
    "Sqrt": jnp.sqrt,
    "Erf": lax.erf,
    "Exp": jnp.exp,
    "Log": jnp.log,
    "Neg": jnp.negative,
    "Abs": jnp.abs,
    "Tanh": jnp.tanh,
    "Reciprocal": jnp.reciprocal,
    "Floor": jnp.floor,
    "Ceil": jnp.ceil,
    "Round": jnp.round,  # round half to even, like ONNX
    "Sign": jnp.sign,
    "Sin": jnp.sin,
    "Cos": jnp.cos,
    "Not": jnp.logical_not,
}


def _binary(fn: Any) -> Any:
    def translate(call: NodeCall, a: Any, b: Any) -> Any:
        return fn(a, b)

    return translate


def _unary(fn: Any) -> Any:
    def translate(call: NodeCall, x: Any) -> Any:
        return fn(x)

    return translate


for _op, _fn in _BINARY.items():
    register(_op)(_binary(_fn))
for _op, _fn in _UNARY.items():
    register(_op)(_unary(_fn))


@register("Div")
def div(call: NodeCall, a: Any, b: Any) -> Any:
    """Division; integer division truncates toward zero as ONNX specifies."""
    if jnp.issubdtype(a.dtype, jnp.integer):
        a, b = jnp.broadcast_arrays(a, b)
        return lax.div(a, b)
    return jnp.divide(a, b)


@register("Mod")
def mod(call: NodeCall, a: Any, b: Any) -> Any:
    """Remainder: sign of the divisor (``fmod=0``) or of the dividend (``fmod=1``, C fmod)."""
    if call.attr("fmod", 0):
        return jnp.fmod(a, b)
    return jnp.remainder(a, b)


@register("Pow")
def power(call: NodeCall, x: Any, y: Any) -> Any:
    """``x ** y``; the result has the type of ``x`` (the exponent may be another type)."""
    return jnp.power(x, y).astype(x.dtype)


@register("Min")
def minimum(call: NodeCall, *xs: Any) -> Any:
    """Element-wise minimum of any number of inputs (broadcasting)."""
    return functools.reduce(jnp.minimum, xs)


@register("Max")
def maximum(call: NodeCall, *xs: Any) -> Any:
    """Element-wise maximum of any number of inputs (broadcasting)."""
    return functools.reduce(jnp.maximum, xs)


@register("Sum")
def total(call: NodeCall, *xs: Any) -> Any:
    """Element-wise sum of any number of inputs (broadcasting)."""
    return functools.reduce(jnp.add, xs)


@register("Where")
def where(call: NodeCall, condition: Any, x: Any, y: Any) -> Any:
    """``x`` where ``condition`` holds, else ``y``."""
    return jnp.where(condition, x, y)


@register("Identity")
def identity(call: NodeCall, x: Any) -> Any:
    """Return ``x`` unchanged."""
    return x


@register("Cast")
def cast(call: NodeCall, x: Any) -> Any:
    """Cast to attribute ``to``; floats follow the graph's float dtype (see ``onnx_dtype``)."""
    return x.astype(onnx_dtype(int(call.attr("to"))))


@register("CastLike")
def cast_like(call: NodeCall, x: Any, like: Any) -> Any:
    """Cast ``x`` to the dtype of ``like``."""
    return x.astype(like.dtype)


@register("Mean")
def mean(call: NodeCall, *xs: Any) -> Any:
    """Element-wise mean of any number of inputs: their Sum divided by their number."""
    return functools.reduce(jnp.add, xs) / len(xs)
