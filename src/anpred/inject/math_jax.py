"""Fault operations in jax (``jax.lax`` / ``jax.numpy``), traced into the jitted graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from anpred.inject.math import FaultMath, mantissa_mask


class JaxFaultMath(FaultMath):
    """:class:`~anpred.inject.math.FaultMath` with jax operators."""

    library = "jax"

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        self._lax = jax.lax
        self._jnp = jnp

    def is_float32(self, x: Any) -> bool:
        return getattr(x, "dtype", None) == self._jnp.float32

    def is_reduced(self, x: Any) -> bool:
        jnp = self._jnp
        return getattr(x, "dtype", None) in (jnp.bfloat16, jnp.float16)

    def widen(self, x: Any) -> Any:
        return x.astype(self._jnp.float32)

    def narrow(self, y: Any, like: Any) -> Any:
        return y.astype(like.dtype)

    def round_trip(self, x: Any, dtype: str) -> Any:
        return x.astype(self._jnp.dtype(dtype)).astype(self._jnp.float32)

    def truncate_mantissa(self, x: Any, bits: int) -> Any:
        lax, jnp = self._lax, self._jnp
        as_int = lax.bitcast_convert_type(x, jnp.int32)
        return lax.bitcast_convert_type(as_int & jnp.int32(mantissa_mask(bits)), jnp.float32)

    def lookup_linear(
        self, x: Any, start: float, step: float, values: np.ndarray, slopes: np.ndarray
    ) -> Any:
        jnp = self._jnp
        n = len(values)
        clipped = jnp.clip(x, jnp.float32(start), jnp.float32(start + n * step))
        t = (clipped - jnp.float32(start)) * jnp.float32(1.0 / step)
        i = jnp.minimum(jnp.floor(t), jnp.float32(n - 1))
        index = i.astype(jnp.int32)
        return jnp.take(jnp.asarray(values), index) + (t - i) * jnp.take(jnp.asarray(slopes), index)

    def blend(self, x: Any, y: Any, scale: float) -> Any:
        return x + self._jnp.float32(scale) * (y - x)

    def shape(self, x: Any) -> tuple[int | None, ...]:
        return tuple(int(d) for d in x.shape)

    def above_rms(self, x: Any, factor: float) -> Any:
        jnp = self._jnp
        return jnp.abs(x) > jnp.float32(factor) * jnp.sqrt(jnp.mean(x * x))

    def first_channels(self, x: Any, axis: int, count: int) -> Any:
        shape = [1] * x.ndim
        shape[axis] = x.shape[axis]
        return self._lax.broadcasted_iota(self._jnp.int32, tuple(shape), axis) < count

    def where(self, mask: Any, x: Any, y: Any) -> Any:
        return self._jnp.where(mask, x, y)


MATH = JaxFaultMath
