"""Fault operations in TensorFlow, traced into the ``tf.function`` (XLA when compiled).

TensorFlow values carry their layout (:class:`~anpred.translate.tensorflow.layout.TFValue`);
every fault operation is elementwise (or a whole-tensor reduction), so it works on the
stored tensor and the result keeps the value's layout; a partial fault's channel axis is
where the layout stores ONNX's axis 1 (axis 3 of an NHWC value).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anpred.inject.math import FaultMath, mantissa_mask


class TensorFlowFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` with TensorFlow operators."""

    library = "tensorflow"

    def __init__(self) -> None:
        from anpred.translate.tensorflow.layout import NHWC, TFValue
        from anpred.translate.tensorflow.lean_import import tf

        self._tf = tf
        self._value = TFValue
        self._nhwc = NHWC

    def unwrap(self, value: Any) -> Any:
        return value.tensor

    def rewrap(self, like: Any, tensor: Any) -> Any:
        return self._value(tensor, like.layout)

    def is_float32(self, x: Any) -> bool:
        return getattr(x, "dtype", None) == self._tf.float32

    def is_reduced(self, x: Any) -> bool:
        tf = self._tf
        return getattr(x, "dtype", None) in (tf.bfloat16, tf.float16)

    def widen(self, x: Any) -> Any:
        return self._tf.cast(x, self._tf.float32)

    def narrow(self, y: Any, like: Any) -> Any:
        return self._tf.cast(y, like.dtype)

    def round_trip(self, x: Any, dtype: str) -> Any:
        tf = self._tf
        return tf.cast(tf.cast(x, tf.as_dtype(dtype)), tf.float32)

    def truncate_mantissa(self, x: Any, bits: int) -> Any:
        tf = self._tf
        as_int = tf.bitcast(x, tf.int32)
        masked = tf.bitwise.bitwise_and(as_int, tf.constant(mantissa_mask(bits), tf.int32))
        return tf.bitcast(masked, tf.float32)

    def lookup_linear(
        self, x: Any, start: float, step: float, values: np.ndarray, slopes: np.ndarray
    ) -> Any:
        tf = self._tf
        n = len(values)
        clipped = tf.clip_by_value(x, np.float32(start), np.float32(start + n * step))
        t = (clipped - np.float32(start)) * np.float32(1.0 / step)
        i = tf.minimum(tf.floor(t), np.float32(n - 1))
        index = tf.cast(i, tf.int32)
        return tf.gather(tf.constant(values), index) + (t - i) * tf.gather(
            tf.constant(slopes), index
        )

    def blend(self, x: Any, y: Any, scale: float) -> Any:
        return x + np.float32(scale) * (y - x)

    def channel_axis(self, value: Any) -> int:
        return 3 if value.layout == self._nhwc else 1

    def shape(self, x: Any) -> tuple[int | None, ...]:
        return tuple(x.shape.as_list())

    def above_rms(self, x: Any, factor: float) -> Any:
        tf = self._tf
        return tf.abs(x) > np.float32(factor) * tf.sqrt(tf.reduce_mean(x * x))

    def first_channels(self, x: Any, axis: int, count: int) -> Any:
        tf = self._tf
        shape = [1] * x.shape.rank
        shape[axis] = int(x.shape[axis])
        return tf.reshape(tf.range(shape[axis]) < count, shape)

    def where(self, mask: Any, x: Any, y: Any) -> Any:
        return self._tf.where(mask, x, y)


MATH = TensorFlowFaultMath
