"""The few tensor operations fault kinds are written against, one implementation per library.

A fault kind is implemented once, in terms of :class:`FaultMath`; each translated library
(``math_jax``, ``math_torch``, ``math_tensorflow``, ``math_paddle``) implements it with its
own operators inside the traced/compiled graph, and
:class:`~anpred.inject.onnx_rewrite.OnnxFaultMath` implements it by appending ONNX nodes
(for onnxruntime and OpenVINO). Implementations import their library when constructed, so
this package imports no DL library.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from anpred.errors import UsageError

#: Library → module whose ``MATH`` class implements :class:`FaultMath` for it.
MATH_MODULES = {
    "jax": "anpred.inject.math_jax",
    "torch": "anpred.inject.math_torch",
    "tensorflow": "anpred.inject.math_tensorflow",
    "paddle": "anpred.inject.math_paddle",
}

#: Reduced-precision formats a value can be rounded to.
ROUND_TRIP_DTYPES = ("bfloat16", "float16")


class FaultMath(ABC):
    """Tensor operations for fault kinds, in one library.

    Values handed to a kind are the library's own values (e.g. TensorFlow's layout-tagged
    values); :meth:`unwrap` and :meth:`rewrap` give access to the tensor inside. Every
    operation takes and returns unwrapped tensors of dtype float32, except :meth:`where`
    (any float dtype) and the masks (boolean).
    """

    library: str = ""

    def unwrap(self, value: Any) -> Any:
        """Return the tensor inside a library value (identity by default)."""
        return value

    def rewrap(self, like: Any, tensor: Any) -> Any:
        """Return ``tensor`` as a library value shaped like ``like`` (identity by default)."""
        return tensor

    @abstractmethod
    def is_float32(self, x: Any) -> bool:
        """Whether ``x`` is a float32 tensor (faulted as it is)."""

    def is_reduced(self, x: Any) -> bool:
        """Whether ``x`` is a bfloat16 or float16 tensor (a reduced-precision participant's:
        faulted on its float32 value, :meth:`widen`, and rounded back, :meth:`narrow`).
        """
        return False

    def widen(self, x: Any) -> Any:
        """``x`` (bfloat16/float16) as float32 (exact)."""
        raise NotImplementedError(f"{self.library}: no reduced-precision faults")

    def narrow(self, y: Any, like: Any) -> Any:
        """float32 ``y`` rounded to the dtype of ``like``."""
        raise NotImplementedError(f"{self.library}: no reduced-precision faults")

    def faulted(self, x: Any, fn: Any) -> Any:
        """``fn`` (float32 → float32) applied to a float tensor ``x`` in its own dtype:
        float32 directly, bfloat16/float16 through float32; ``None`` for other tensors.
        """
        if self.is_float32(x):
            return fn(x)
        if self.is_reduced(x):
            return self.narrow(fn(self.widen(x)), x)
        return None

    @abstractmethod
    def round_trip(self, x: Any, dtype: str) -> Any:
        """Cast ``x`` to ``dtype`` (``bfloat16``/``float16``) and back to float32."""

    @abstractmethod
    def truncate_mantissa(self, x: Any, bits: int) -> Any:
        """Keep the top ``bits`` of the 23 fraction bits of ``x`` (round toward zero)."""

    @abstractmethod
    def lookup_linear(
        self, x: Any, start: float, step: float, values: np.ndarray, slopes: np.ndarray
    ) -> Any:
        """Piecewise-linear table lookup.

        With ``t = (clip(x, start, start + n*step) - start) / step`` and
        ``i = min(floor(t), n - 1)`` (``n = len(values)``), return
        ``values[i] + (t - i) * slopes[i]``.
        """

    @abstractmethod
    def blend(self, x: Any, y: Any, scale: float) -> Any:
        """Return ``x + scale * (y - x)`` (the error ``y - x`` scaled by ``scale``)."""

    # -- partial faults: which elements take the faulty value ---------------------------

    def channel_axis(self, value: Any) -> int:
        """Axis of the channels of a library value (ONNX's axis 1 by default; a value that
        carries its layout says where that axis is stored).
        """
        return 1

    @abstractmethod
    def shape(self, x: Any) -> tuple[int | None, ...]:
        """Static shape of ``x`` (``None`` for an unknown dimension)."""

    @abstractmethod
    def above_rms(self, x: Any, factor: float) -> Any:
        """Boolean mask of ``|x| > factor * sqrt(mean(x²))`` (mean over the whole tensor)."""

    @abstractmethod
    def first_channels(self, x: Any, axis: int, count: int) -> Any:
        """Boolean mask, broadcastable to ``x``, true for indices ``< count`` along ``axis``."""

    @abstractmethod
    def where(self, mask: Any, x: Any, y: Any) -> Any:
        """``x`` where ``mask``, else ``y`` (same dtype; exact)."""


def mantissa_mask(bits: int) -> int:
    """The int32 mask that keeps the sign, the exponent and the top ``bits`` fraction bits."""
    return int(np.array(~((1 << (23 - bits)) - 1) & 0xFFFFFFFF, dtype=np.uint32).view(np.int32))


def library_math(library: str) -> FaultMath:
    """Return the :class:`FaultMath` of a translated library (imports the library).

    Raises:
        UsageError: For a library without translated fault injection.
    """
    if library not in MATH_MODULES:
        raise UsageError(
            f"fault injection through translators is not available for "
            f"{library}; it is for {', '.join(MATH_MODULES)}"
        )
    return importlib.import_module(MATH_MODULES[library]).MATH()
