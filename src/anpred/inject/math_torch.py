"""Fault operations in torch, run inside the translated (optionally compiled) graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from anpred.inject.math import FaultMath, mantissa_mask


class TorchFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` with torch operators."""

    library = "torch"

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16}

    def is_float32(self, x: Any) -> bool:
        return isinstance(x, self._torch.Tensor) and x.dtype == self._torch.float32

    def is_reduced(self, x: Any) -> bool:
        return isinstance(x, self._torch.Tensor) and x.dtype in self._dtypes.values()

    def widen(self, x: Any) -> Any:
        return x.to(self._torch.float32)

    def narrow(self, y: Any, like: Any) -> Any:
        return y.to(like.dtype)

    def round_trip(self, x: Any, dtype: str) -> Any:
        return x.to(self._dtypes[dtype]).to(self._torch.float32)

    def truncate_mantissa(self, x: Any, bits: int) -> Any:
        torch = self._torch
        as_int = x.contiguous().view(torch.int32)
        return (as_int & mantissa_mask(bits)).view(torch.float32)

    def lookup_linear(
        self, x: Any, start: float, step: float, values: np.ndarray, slopes: np.ndarray
    ) -> Any:
        torch = self._torch
        n = len(values)
        clipped = torch.clamp(x, float(np.float32(start)), float(np.float32(start + n * step)))
        t = (clipped - float(np.float32(start))) * float(np.float32(1.0 / step))
        i = torch.clamp(torch.floor(t), max=float(n - 1))
        index = i.to(torch.int64)
        table = torch.from_numpy(values).to(x.device)
        slope = torch.from_numpy(slopes).to(x.device)
        return table[index] + (t - i) * slope[index]

    def blend(self, x: Any, y: Any, scale: float) -> Any:
        return x + float(np.float32(scale)) * (y - x)

    def shape(self, x: Any) -> tuple[int | None, ...]:
        return tuple(int(d) for d in x.shape)

    def above_rms(self, x: Any, factor: float) -> Any:
        torch = self._torch
        return torch.abs(x) > float(np.float32(factor)) * torch.sqrt(torch.mean(x * x))

    def first_channels(self, x: Any, axis: int, count: int) -> Any:
        torch = self._torch
        shape = [1] * x.dim()
        shape[axis] = x.shape[axis]
        return (torch.arange(x.shape[axis], device=x.device) < count).reshape(shape)

    def where(self, mask: Any, x: Any, y: Any) -> Any:
        return self._torch.where(mask, x, y)


MATH = TorchFaultMath
