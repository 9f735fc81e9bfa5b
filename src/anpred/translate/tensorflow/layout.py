"""TensorFlow values that carry their layout, and the two kinds of translator.

The adapter feeds 4-D graph inputs as NHWC (TensorFlow's native CPU layout) and the
layout travels with every value (:class:`TFValue`) instead of being undone after each op:

* layout-aware translators (:func:`layout_op`) get and return :class:`TFValue` objects.
  Unary and broadcasting elementwise ops, Concat, Split, Slice, the reductions, Softmax
  and Pad keep NHWC and remap their axes; Conv, pooling and Resize run their NHWC kernels
  and leave the output in the policy's layout (:func:`spatial_result`); BatchNormalization
  and GlobalAveragePool work in whatever layout they get.
* every other translator (:func:`onnx_op`) sees plain tensors in ONNX's layout: its 4-D
  NHWC inputs are transposed back to NCHW first (once per value, cached), and its
  outputs are NCHW.

Values that are not 4-D are always in ONNX's layout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from anpred.translate.registry import NodeCall, register
from anpred.translate.tensorflow import policy
from anpred.translate.tensorflow.lean_import import tf
from anpred.translate.tensorflow.policy import NCHW, NHWC

#: Registry key of the TensorFlow translators.
LIBRARY = "tensorflow"
#: Permutation that turns an NCHW tensor into NHWC.
TO_NHWC = (0, 2, 3, 1)
#: Permutation that turns an NHWC tensor into NCHW.
TO_NCHW = (0, 3, 1, 2)
#: ``NHWC_AXIS[a]`` is where ONNX (NCHW) axis ``a`` of a 4-D value lives in NHWC.
NHWC_AXIS = (0, 3, 1, 2)


class TFValue:
    """A TensorFlow tensor and the layout its 4-D data is stored in.

    Args:
        tensor: The tensor (eager or symbolic).
        layout: ``"NCHW"`` (ONNX's order; the only layout of non-4-D values) or ``"NHWC"``.

    Raises:
        ValueError: For an NHWC value that is not 4-D.
    """

    __slots__ = ("_nchw", "_nhwc", "layout", "tensor")

    def __init__(self, tensor: tf.Tensor, layout: str = NCHW) -> None:
        if layout not in (NCHW, NHWC):
            raise ValueError(f"unknown layout {layout!r}")
        if layout == NHWC and tensor.shape.rank != 4:
            raise ValueError(f"an NHWC value must be 4-D, got shape {tensor.shape}")
        self.tensor = tensor
        self.layout = layout
        self._nchw: tf.Tensor | None = None
        self._nhwc: tf.Tensor | None = None

    def __repr__(self) -> str:
        return f"TFValue({self.layout}, shape={self.tensor.shape}, dtype={self.tensor.dtype.name})"

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return int(self.tensor.shape.rank)

    @property
    def dtype(self) -> tf.DType:
        """Element type."""
        return self.tensor.dtype

    def onnx_shape(self) -> list[int | None]:
        """Return the static shape in ONNX's (NCHW) order; unknown dimensions are ``None``."""
        shape = self.tensor.shape.as_list()
        if self.layout == NHWC:
            return [shape[0], shape[3], shape[1], shape[2]]
        return shape

    def nchw(self) -> tf.Tensor:
        """Return the tensor in ONNX's layout (transposed once, then cached)."""
        if self.layout == NCHW:
            return self.tensor
        if self._nchw is None:
            self._nchw = tf.transpose(self.tensor, TO_NCHW)
        return self._nchw

    def nhwc(self) -> tf.Tensor:
        """Return the 4-D tensor in NHWC (transposed once, then cached)."""
        if self.layout == NHWC:
            return self.tensor
        if self.rank != 4:
            raise ValueError(f"only 4-D values have an NHWC form, got shape {self.tensor.shape}")
        if self._nhwc is None:
            self._nhwc = tf.transpose(self.tensor, TO_NHWC)
        return self._nhwc


def nhwc_axis(axis: int) -> int:
    """Map an ONNX axis of a 4-D value (negative allowed) to its NHWC position."""
    return NHWC_AXIS[axis % 4]


def normalize_axis(axis: int, rank: int) -> int:
    """Return ``axis`` in ``[0, rank)`` (ONNX allows negative axes)."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def float_attr(call: NodeCall, key: str, default: float) -> float:
    """Return float attribute ``key``; defaults are rounded to float32 like stored attributes."""
    return float(np.float32(call.attrs.get(key, default)))


def wrap(result: Any, layout: str = NCHW) -> TFValue | tuple[TFValue | None, ...]:
    """Wrap a translator's tensor (or tuple of tensors) as :class:`TFValue` objects."""
    if isinstance(result, tuple | list):
        return tuple(None if t is None else TFValue(t, layout) for t in result)
    return TFValue(result, layout)


def spatial_result(y_nhwc: tf.Tensor) -> TFValue:
    """Leave the NHWC output of a spatial kernel in the policy's layout."""
    if policy.current().layout == NHWC:
        return TFValue(y_nhwc, NHWC)
    return TFValue(tf.transpose(y_nhwc, TO_NCHW), NCHW)


def broadcast_operands(values: Sequence[TFValue | None]) -> tuple[str, list[tf.Tensor | None]]:
    """Bring the operands of a broadcasting op into one layout.

    When a 4-D operand is NHWC and no operand has more than 4 dimensions, the op runs in
    NHWC: NCHW 4-D operands are transposed, lower-rank ones (per-channel ``(C, 1, 1)``
    constants, rows ``(W,)`` ...) get leading ones as ONNX broadcasting implies and are
    transposed too; scalars and single elements are left alone. Otherwise every operand
    is taken in ONNX's layout.

    Returns:
        The layout of the result and the operands as tensors (``None`` stays ``None``).
    """
    present = [v for v in values if v is not None]
    if any(v.layout == NHWC for v in present) and all(v.rank <= 4 for v in present):
        return NHWC, [None if v is None else _nhwc_operand(v) for v in values]
    return NCHW, [None if v is None else v.nchw() for v in values]


def _nhwc_operand(value: TFValue) -> tf.Tensor:
    if value.layout == NHWC:
        return value.tensor
    tensor = value.tensor
    shape = tensor.shape
    if value.rank == 0 or (shape.is_fully_defined() and shape.num_elements() == 1):
        return tensor
    for _ in range(4 - value.rank):
        tensor = tf.expand_dims(tensor, 0)
    return tf.transpose(tensor, TO_NHWC)


def layout_op(op_type: str, since: int = 1) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a layout-aware translator: it gets and returns :class:`TFValue` objects."""
    return register(LIBRARY, op_type, since)


def onnx_op(op_type: str, since: int = 1) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a translator that works on plain tensors in ONNX's layout.

    The decorated function gets ``(call, *tensors)`` with every input in NCHW (``None`` for
    missing optional inputs) and returns a tensor or a tuple of tensors in ONNX's layout.
    It is returned unchanged, so other translators can reuse it.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def translate(call: NodeCall, *inputs: TFValue | None) -> Any:
            tensors = [None if value is None else value.nchw() for value in inputs]
            return wrap(fn(call, *tensors))

        register(LIBRARY, op_type, since)(translate)
        return fn

    return decorate
