"""Broadcasting elementwise ops, Where, Cast, Identity and Dropout.

Broadcasting ops run in NHWC when an operand is NHWC (see
:func:`~anpred.translate.tensorflow.layout.broadcast_operands`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import onnx
from onnx import helper

from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow import policy
from anpred.translate.tensorflow.layout import TFValue, broadcast_operands, layout_op
from anpred.translate.tensorflow.lean_import import tf


def _divide(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    if a.dtype.is_integer:
        return tf.truncatediv(a, b)  # ONNX integer Div truncates, like C
    return tf.math.divide(a, b)


def _pow(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    return tf.math.pow(a, tf.cast(b, a.dtype))  # ONNX lets the exponent type differ


_BINARY: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "Add": tf.math.add,
    "Sub": tf.math.subtract,
    "Mul": tf.math.multiply,
    "Div": _divide,
    "Pow": _pow,
    "Equal": tf.math.equal,
    "Less": tf.math.less,
    "Greater": tf.math.greater,
}


def _register_binary(op_type: str, fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, a: TFValue, b: TFValue) -> TFValue:
        layout, (ta, tb) = broadcast_operands([a, b])
        return TFValue(fn(ta, tb), layout)

    translate.__name__ = f"translate_{op_type.lower()}"


for _op_type, _fn in _BINARY.items():
    _register_binary(_op_type, _fn)


@layout_op("Mod")
def mod(call: NodeCall, a: TFValue, b: TFValue) -> TFValue:
    """Remainder: ``tf.math.floormod`` for ``fmod=0``, ``tf.truncatemod`` for ``fmod=1``.

    With ``fmod=0`` the result takes the divisor's sign, with ``fmod=1`` the dividend's.
    """
    layout, (ta, tb) = broadcast_operands([a, b])
    fn = tf.truncatemod if call.attr("fmod", 0) else tf.math.floormod
    return TFValue(fn(ta, tb), layout)


def _register_variadic(op_type: str, fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor]) -> None:
    @layout_op(op_type)
    def translate(call: NodeCall, *values: TFValue) -> TFValue:
        layout, tensors = broadcast_operands(values)
        return TFValue(functools.reduce(fn, tensors), layout)

    translate.__name__ = f"translate_{op_type.lower()}"


_register_variadic("Min", tf.math.minimum)
_register_variadic("Max", tf.math.maximum)
_register_variadic("Sum", tf.math.add)


@layout_op("Where")
def where(call: NodeCall, condition: TFValue, x: TFValue, y: TFValue) -> TFValue:
    """``tf.where`` (broadcasting, like ONNX)."""
    layout, (tc, tx, ty) = broadcast_operands([condition, x, y])
    return TFValue(tf.where(tc, tx, ty), layout)


_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
}


def onnx_to_tf_dtype(elem_type: int) -> tf.DType:
    """TensorFlow dtype of an ONNX element type; every float type is the policy's float."""
    if elem_type in _FLOAT_TYPES:
        return policy.current().tf_float
    return tf.as_dtype(helper.tensor_dtype_to_np_dtype(elem_type))


@layout_op("Cast")
def cast(call: NodeCall, x: TFValue) -> TFValue:
    """``tf.cast``; a cast to any float type gives the graph's float dtype."""
    return TFValue(tf.cast(x.tensor, onnx_to_tf_dtype(int(call.attr("to")))), x.layout)


@layout_op("Identity")
def identity(call: NodeCall, x: TFValue) -> TFValue:
    """``tf.identity``."""
    return TFValue(tf.identity(x.tensor), x.layout)


@layout_op("Dropout")
def dropout(call: NodeCall, x: TFValue, *_ignored: TFValue | None) -> tuple[TFValue, ...]:
    """Inference dropout: the identity, plus an all-true mask when the node asks for it."""
    out = TFValue(tf.identity(x.tensor), x.layout)
    if len(call.output_shapes) > 1:
        return out, TFValue(tf.ones_like(x.tensor, dtype=tf.bool), x.layout)
    return (out,)


@layout_op("Mean")
def mean(call: NodeCall, *values: TFValue) -> TFValue:
    """ONNX Mean: the Sum of the inputs (``tf.math.add``) divided by their number."""
    layout, tensors = broadcast_operands(values)
    total = functools.reduce(tf.math.add, tensors)
    return TFValue(tf.math.divide(total, tf.cast(len(tensors), total.dtype)), layout)
