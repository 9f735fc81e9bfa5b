"""Quantization TensorFlow translators, in ONNX's layout: QuantizeLinear, DequantizeLinear,
QLinearMatMul and BitCast.

TensorFlow's own quantization ops (``tf.quantization.quantize``) use other rounding and
range rules, so the linear (de)quantizers are composed: ``tf.round`` (half to even) of
``x / scale`` plus the zero point, clipped to the integer type's range (``tf.clip_by_value``)
before ``tf.cast``; per-axis and blocked scales are broadcast along ``axis`` (``tf.repeat``
for blocks). QLinearMatMul multiplies the zero-point-shifted integers exactly (float64
``tf.linalg.matmul``: the products of 8-bit values are far below 2^53). BitCast is
``tf.bitcast``. Integer element types only (no float8/int4).
"""

from __future__ import annotations

from onnx import TensorProto, helper

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall
from anpred.translate.tensorflow import policy
from anpred.translate.tensorflow.layout import onnx_op
from anpred.translate.tensorflow.lean_import import tf


def _expand(call: NodeCall, param: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """A scale or zero point broadcast against ``x`` (scalar, per-axis or blocked)."""
    rank = x.shape.rank
    if param.shape.rank == 0 or param.shape.num_elements() == 1 and param.shape.rank <= 1:
        return tf.reshape(param, [])
    axis = int(call.attr("axis", 1)) % rank
    block = int(call.attr("block_size", 0))
    if block:
        repeated = tf.repeat(param, block, axis=axis)
        return tf.slice(repeated, [0] * rank, tf.shape(x))
    shape = [1] * rank
    shape[axis] = -1
    return tf.reshape(param, shape)


def _int_range(dtype: tf.DType) -> tuple[float, float]:
    if not dtype.is_integer:
        raise AnpredError(f"tensorflow quantization to {dtype.name} is not translated")
    return float(dtype.min), float(dtype.max)


@onnx_op("QuantizeLinear", since=10)
def quantize_linear(
    call: NodeCall, x: tf.Tensor, scale: tf.Tensor, zero: tf.Tensor | None = None
) -> tf.Tensor:
    """ONNX QuantizeLinear: ``saturate(round(x / scale) + zero_point)`` (composed)."""
    if zero is not None:
        out = zero.dtype
    elif call.attr("output_dtype"):
        out = tf.as_dtype(helper.tensor_dtype_to_np_dtype(int(call.attr("output_dtype"))))
    else:
        out = tf.uint8
    low, high = _int_range(out)
    work = tf.float64 if x.dtype == tf.float64 else tf.float32
    y = tf.round(tf.cast(x, work) / tf.cast(_expand(call, scale, x), work))
    if zero is not None:
        y = y + tf.cast(_expand(call, zero, x), work)
    return tf.cast(tf.clip_by_value(y, low, high), out)


@onnx_op("DequantizeLinear", since=10)
def dequantize_linear(
    call: NodeCall, x: tf.Tensor, scale: tf.Tensor, zero: tf.Tensor | None = None
) -> tf.Tensor:
    """ONNX DequantizeLinear: ``(x - zero_point) * scale`` in the scale's float type."""
    work = scale.dtype
    shifted = tf.cast(x, tf.int64 if x.dtype.is_integer else work)
    if zero is not None:
        shifted = shifted - tf.cast(_expand(call, zero, x), shifted.dtype)
    return tf.cast(shifted, work) * _expand(call, scale, x)


@onnx_op("QLinearMatMul", since=10)
def qlinear_matmul(
    call: NodeCall, a: tf.Tensor, a_scale: tf.Tensor, a_zero: tf.Tensor, b: tf.Tensor,
    b_scale: tf.Tensor, b_zero: tf.Tensor, y_scale: tf.Tensor, y_zero: tf.Tensor,
) -> tf.Tensor:  # fmt: skip
    """ONNX QLinearMatMul: the exact product of the zero-point-shifted operands, scaled by
    ``a_scale * b_scale / y_scale``, rounded half to even, shifted by ``y_zero_point`` and
    saturated to its type.
    """

    def shifted(v: tf.Tensor, zero: tf.Tensor) -> tf.Tensor:
        return tf.cast(v, tf.float64) - tf.cast(zero, tf.float64)

    product = tf.linalg.matmul(shifted(a, a_zero), shifted(b, b_zero))
    factor = a_scale * b_scale / y_scale
    y = tf.round(tf.cast(product, factor.dtype) * factor) + tf.cast(y_zero, factor.dtype)
    low, high = _int_range(y_zero.dtype)
    return tf.cast(tf.clip_by_value(y, low, high), y_zero.dtype)


@onnx_op("BitCast", since=26)
def bit_cast(call: NodeCall, x: tf.Tensor) -> tf.Tensor:
    """ONNX BitCast: the same bits as another type of the same width (``tf.bitcast``).

    Bits are a property of the ONNX type: in a float64 run a float input is taken back to
    the float32 it stands for first, and a float result is widened after.
    """
    to = int(call.attr("to"))
    target = tf.as_dtype(helper.tensor_dtype_to_np_dtype(to))
    if x.dtype == tf.float64 and target.size == 4:
        x = tf.cast(x, tf.float32)
    y = tf.bitcast(x, target)
    if to in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE):
        return tf.cast(y, policy.current().tf_float)
    return y
