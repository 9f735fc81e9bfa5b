"""More elementwise ops: trigonometry, rounding, logic, comparisons, activations, CastLike.

Unary ops keep their operand's layout; binary ones broadcast as the arithmetic ops do
(:func:`~anpred.translate.tensorflow.layout.broadcast_operands`). ArgMax/ArgMin and the
run-time Shape work in ONNX's layout. Float attributes (defaults included) are float32
values, as ONNX stores them.
"""

from __future__ import annotations

from collections.abc import Callable

from onnx import TensorProto

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow.layout import (
    TFValue,
    broadcast_operands,
    float_attr,
    layout_op,
    normalize_axis,
    onnx_op,
)
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.ops_elementwise import onnx_to_tf_dtype


def _softplus(x: tf.Tensor) -> tf.Tensor:
    return tf.math.softplus(x)


_UNARY: dict[str, Callable[[tf.Tensor], tf.Tensor]] = {
    "Sin": tf.math.sin,
    "Cos": tf.math.cos,
    "Tan": tf.math.tan,
    "Asin": tf.math.asin,
    "Acos": tf.math.acos,
    "Atan": tf.math.atan,
    "Sinh": tf.math.sinh,
    "Cosh": tf.math.cosh,
    "Asinh": tf.math.asinh,
    "Acosh": tf.math.acosh,
    "Atanh": tf.math.atanh,
    "Round": tf.math.round,  # half to even, as ONNX
    "Sign": tf.math.sign,
    "IsNaN": tf.math.is_nan,
    "Not": tf.math.logical_not,
    "Softsign": tf.math.softsign,
    "Softplus": _softplus,
    "Mish": lambda x: x * tf.math.tanh(tf.math.softplus(x)),
}

_BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "GreaterOrEqual": tf.math.greater_equal,
    "LessOrEqual": tf.math.less_equal,
    "And": tf.math.logical_and,
    "Or": tf.math.logical_or,
    "Xor": tf.math.logical_xor,
}


def _register_unary(op_type: str, fn: Callable[[tf.Tensor], tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, x: TFValue) -> TFValue:
        return TFValue(fn(x.tensor), x.layout)

    translate.__name__ = f"translate_{op_type.lower()}"


def _register_binary(op_type: str, fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, a: TFValue, b: TFValue) -> TFValue:
        layout, (ta, tb) = broadcast_operands([a, b])
        return TFValue(fn(ta, tb), layout)

    translate.__name__ = f"translate_{op_type.lower()}"


for _op_type, _fn in _UNARY.items():
    _register_unary(_op_type, _fn)
for _op_type, _fn in _BINARY.items():
    _register_binary(_op_type, _fn)


@layout_op("IsInf")
def is_inf(call: NodeCall, x: TFValue) -> TFValue:
    """``tf.math.is_inf``, restricted by ``detect_positive``/``detect_negative``."""
    inf = tf.math.is_inf(x.tensor)
    if not call.attr("detect_positive", 1):
        inf = tf.math.logical_and(inf, x.tensor < 0)
    if not call.attr("detect_negative", 1):
        inf = tf.math.logical_and(inf, x.tensor > 0)
    return TFValue(inf, x.layout)


@layout_op("Elu")
def elu(call: NodeCall, x: TFValue) -> TFValue:
    """ELU; ``tf.nn.elu`` scaled on the negative side by ``alpha`` (default 1)."""
    alpha = float_attr(call, "alpha", 1.0)
    y = tf.nn.elu(x.tensor)
    if alpha != 1.0:
        y = tf.where(x.tensor > 0, y, y * alpha)
    return TFValue(y, x.layout)


@layout_op("Selu")
def selu(call: NodeCall, x: TFValue) -> TFValue:
    """``gamma * (x > 0 ? x : alpha * (exp(x) - 1))`` with the node's float32 constants."""
    alpha = float_attr(call, "alpha", 1.67326319217681884765625)
    gamma = float_attr(call, "gamma", 1.05070102214813232421875)
    t = x.tensor
    return TFValue(tf.where(t > 0, t, tf.math.expm1(t) * alpha) * gamma, x.layout)


@layout_op("Celu")
def celu(call: NodeCall, x: TFValue) -> TFValue:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (``alpha`` default 1)."""
    alpha = float_attr(call, "alpha", 1.0)
    t = x.tensor
    return TFValue(tf.nn.relu(t) + tf.minimum(0.0, tf.math.expm1(t / alpha) * alpha), x.layout)


@layout_op("ThresholdedRelu")
def thresholded_relu(call: NodeCall, x: TFValue) -> TFValue:
    """``x`` where ``x > alpha`` (default 1), else 0."""
    t = x.tensor
    return TFValue(tf.where(t > float_attr(call, "alpha", 1.0), t, tf.zeros_like(t)), x.layout)


@layout_op("Gelu", since=20)
def gelu(call: NodeCall, x: TFValue) -> TFValue:
    """``tf.nn.gelu``, exact or with the tanh approximation."""
    approximate = call.attr("approximate", "none") == "tanh"
    return TFValue(tf.nn.gelu(x.tensor, approximate=approximate), x.layout)


@layout_op("CastLike")
def cast_like(call: NodeCall, x: TFValue, target: TFValue) -> TFValue:
    """``tf.cast`` to the target's type (floats to the graph's float dtype)."""
    dtype = target.dtype
    if dtype.is_floating:
        dtype = onnx_to_tf_dtype(TensorProto.FLOAT)
    return TFValue(tf.cast(x.tensor, dtype), x.layout)


@onnx_op("Shape")
def shape(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """The shape of a value not known statically (``start``, ``end``), int64."""
    dims = tf.shape(x, out_type=tf.int64)
    return dims[call.attr("start", 0) : call.attr("end")]


def _arg(pick: Callable[..., tf.Tensor]) -> Callable[..., tf.Tensor]:
    def translate(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
        axis = normalize_axis(int(call.attr("axis", 0)), x.shape.rank)
        if call.attr("select_last_index", 0):
            last = pick(tf.reverse(x, axis=[axis]), axis=axis, output_type=tf.int64)
            index = x.shape[axis] - 1 - last
        else:
            index = pick(x, axis=axis, output_type=tf.int64)
        return tf.expand_dims(index, axis) if call.attr("keepdims", 1) else index

    return translate


onnx_op("ArgMax")(_arg(tf.math.argmax))
onnx_op("ArgMin")(_arg(tf.math.argmin))
