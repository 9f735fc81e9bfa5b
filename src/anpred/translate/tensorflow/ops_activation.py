"""Unary elementwise ops and activations (layout-transparent: the output keeps the layout)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import TFValue, float_attr, layout_op
from anpred.translate.tensorflow.lean_import import tf

_UNARY: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "Relu": tf.nn.relu,
    "Sigmoid": tf.math.sigmoid,
    "Tanh": tf.math.tanh,
    "Erf": tf.math.erf,
    "Exp": tf.math.exp,
    "Log": tf.math.log,
    "Neg": tf.math.negative,
    "Abs": tf.math.abs,
    "Sqrt": tf.math.sqrt,
    "Reciprocal": tf.math.reciprocal,
    "Floor": tf.math.floor,
    "Ceil": tf.math.ceil,
}


def _register_unary(op_type: str, fn: Callable[[tf.Tensor], tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, x: TFValue) -> TFValue:
        return TFValue(fn(x.tensor), x.layout)

    translate.__name__ = f"translate_{op_type.lower()}"


for _op_type, _fn in _UNARY.items():
    _register_unary(_op_type, _fn)


@layout_op("LeakyRelu")
def leaky_relu(call: NodeCall, x: TFValue) -> TFValue:
    """``tf.nn.leaky_relu`` with ONNX's ``alpha`` (default 0.01)."""
    return TFValue(tf.nn.leaky_relu(x.tensor, alpha=float_attr(call, "alpha", 0.01)), x.layout)


@layout_op("HardSigmoid")
def hard_sigmoid(call: NodeCall, x: TFValue) -> TFValue:
    """``max(0, min(1, alpha * x + beta))`` (defaults 0.2, 0.5)."""
    alpha = float_attr(call, "alpha", 0.2)
    beta = float_attr(call, "beta", 0.5)
    return TFValue(tf.clip_by_value(x.tensor * alpha + beta, 0.0, 1.0), x.layout)


@layout_op("HardSwish")
def hard_swish(call: NodeCall, x: TFValue) -> TFValue:
    """``x * relu6(x + 3) / 6``, as Keras' MobileNetV3 writes it.

    The factor is exactly 1/6 (as in PyTorch); ONNX's function body stores it as a float32
    attribute, which only float64 runs can tell apart (1e-8 relative).
    """
    t = x.tensor
    return TFValue(t * (tf.nn.relu6(t + 3.0) * (1.0 / 6.0)), x.layout)


@layout_op("Clip")
def clip(
    call: NodeCall, x: TFValue, low: TFValue | None = None, high: TFValue | None = None
) -> TFValue:
    """``min(max(x, low), high)``; Clip(0, 6) is ``tf.nn.relu6``, Clip(0, -) ``tf.nn.relu``.

    Bounds are inputs from opset 11 on and attributes before.
    """
    if call.opset < 11:
        low_value = call.attr("min")
        high_value = call.attr("max")
        low_t = None if low_value is None else tf.constant(low_value, x.dtype)
        high_t = None if high_value is None else tf.constant(high_value, x.dtype)
        static = (low_value, high_value)
    else:
        low_t = None if low is None else low.tensor
        high_t = None if high is None else high.tensor
        static = tuple(
            None if c is None else float(np.asarray(c).reshape(-1)[0])
            for c in (call.const(1), call.const(2))
        )
    t = x.tensor
    if static == (0.0, 6.0):
        return TFValue(tf.nn.relu6(t), x.layout)
    if static[0] == 0.0 and high_t is None:
        return TFValue(tf.nn.relu(t), x.layout)
    if low_t is not None:
        t = tf.maximum(t, tf.cast(low_t, t.dtype))
    if high_t is not None:
        t = tf.minimum(t, tf.cast(high_t, t.dtype))
    return TFValue(t, x.layout)
