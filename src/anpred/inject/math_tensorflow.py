"""Fault operations in TensorFlow, traced into the ``tf.function`` (XLA when compiled).

TensorFlow values carry their layout (:class:`~anpred.translate.tensorflow.layout.TFValue`);
every fault operation is elementwise, so it works on the stored tensor and the result
keeps the value's layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anpred.inject.math import FaultMath, mantissa_mask


class TensorFlowFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` with TensorFlow operators."""

    library = "tensorflow"

    def __init__(self) -> None:
        from anpred.translate.tensorflow.layout import TFValue
        from anpred.translate.tensorflow.lean_import import tf

        self._tf = tf
        self._value = TFValue

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


MATH = TensorFlowFaultMath
