"""Fault operations in paddle (dynamic graph), run inside the translated graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from anpred.inject.math import FaultMath, mantissa_mask


class PaddleFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` with paddle operators."""

    library = "paddle"

    def __init__(self) -> None:
        from anpred.translate.paddle.adapter import import_paddle

        self._paddle = import_paddle()

    def is_float32(self, x: Any) -> bool:
        return isinstance(x, self._paddle.Tensor) and x.dtype == self._paddle.float32

    def is_reduced(self, x: Any) -> bool:
        paddle = self._paddle
        return isinstance(x, paddle.Tensor) and x.dtype in (paddle.bfloat16, paddle.float16)

    def widen(self, x: Any) -> Any:
        return self._paddle.cast(x, "float32")

    def narrow(self, y: Any, like: Any) -> Any:
        return self._paddle.cast(y, like.dtype)

    def round_trip(self, x: Any, dtype: str) -> Any:
        return self._paddle.cast(self._paddle.cast(x, dtype), "float32")

    def truncate_mantissa(self, x: Any, bits: int) -> Any:
        paddle = self._paddle
        as_int = paddle.view(x, paddle.int32)
        mask = paddle.full([], mantissa_mask(bits), dtype="int32")
        return paddle.view(paddle.bitwise_and(as_int, mask), paddle.float32)

    def lookup_linear(
        self, x: Any, start: float, step: float, values: np.ndarray, slopes: np.ndarray
    ) -> Any:
        paddle = self._paddle
        n = len(values)
        clipped = paddle.clip(x, float(np.float32(start)), float(np.float32(start + n * step)))
        t = (clipped - float(np.float32(start))) * float(np.float32(1.0 / step))
        i = paddle.clip(paddle.floor(t), max=float(n - 1))
        index = paddle.cast(i, "int64")
        table = paddle.to_tensor(values, place=x.place)
        slope = paddle.to_tensor(slopes, place=x.place)
        return paddle.take(table, index) + (t - i) * paddle.take(slope, index)

    def blend(self, x: Any, y: Any, scale: float) -> Any:
        return x + float(np.float32(scale)) * (y - x)

    def shape(self, x: Any) -> tuple[int | None, ...]:
        return tuple(int(d) for d in x.shape)

    def above_rms(self, x: Any, factor: float) -> Any:
        paddle = self._paddle
        return paddle.abs(x) > float(np.float32(factor)) * paddle.sqrt(paddle.mean(x * x))

    def first_channels(self, x: Any, axis: int, count: int) -> Any:
        paddle = self._paddle
        shape = [1] * x.ndim
        shape[axis] = int(x.shape[axis])
        return paddle.reshape(paddle.arange(shape[axis]) < count, shape)

    def where(self, mask: Any, x: Any, y: Any) -> Any:
        if self.is_reduced(x):  # paddle 3.3's CPU ``where`` has no bfloat16/float16 kernel
            return self.narrow(self._paddle.where(mask, self.widen(x), self.widen(y)), x)
        return self._paddle.where(mask, x, y)


MATH = PaddleFaultMath
