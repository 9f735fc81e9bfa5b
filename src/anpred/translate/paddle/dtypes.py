"""ONNX element types as paddle dtypes, with FLOAT following the graph's float dtype."""

from __future__ import annotations

from typing import Any

import paddle
from onnx import TensorProto

from anpred.errors import UsageError

_FIXED = {
    TensorProto.DOUBLE: "float64",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.INT8: "int8",
    TensorProto.INT16: "int16",
    TensorProto.INT32: "int32",
    TensorProto.INT64: "int64",
    TensorProto.UINT8: "uint8",
    TensorProto.BOOL: "bool",
}


def float_dtype() -> str:
    """Return the graph's float dtype (the adapter makes it paddle's default while running)."""
    return paddle.get_default_dtype()


def paddle_dtype(elem_type: int) -> str:
    """Return the paddle dtype name of an ONNX element type.

    ONNX FLOAT maps to :func:`float_dtype`, so that a float64 run stays float64.

    Raises:
        UsageError: When paddle has no equivalent of the element type.
    """
    if elem_type == TensorProto.FLOAT:
        return float_dtype()
    if elem_type not in _FIXED:
        name = TensorProto.DataType.Name(elem_type)
        raise UsageError(f"ONNX element type {name} has no paddle equivalent")
    return _FIXED[elem_type]


def numpy_float_dtype(value: Any) -> str:
    """Return the paddle dtype for a numpy constant: float32 follows the graph's float dtype."""
    name = str(value.dtype)
    return float_dtype() if name == "float32" else name
