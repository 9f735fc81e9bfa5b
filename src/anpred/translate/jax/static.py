"""Static (build-time) values of ONNX inputs and attributes: shapes, axes, pads, sizes.

These are metadata about the graph, so handling them in NumPy is allowed; tensor data
never passes through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from anpred.errors import UsageError
from anpred.translate.registry import NodeCall


def static_value(call: NodeCall, index: int, tensor: Any, what: str) -> np.ndarray | None:
    """Return the build-time value of input ``index``, ``None`` when the input is absent.

    Args:
        call: The node being translated.
        index: Input position.
        tensor: The library tensor passed for that input (``None`` when absent).
        what: Name of the input for the error message (``"shape"``).

    Raises:
        UsageError: When the input is present but only known at run time.
    """
    if tensor is None:
        return None
    value = call.const(index)
    if value is None and not isinstance(tensor, jax.core.Tracer):
        value = np.asarray(tensor)  # computed while tracing (shape arithmetic)
    if value is None:
        raise UsageError(
            f"{call.op_type} {what} of node {call.name} must be static (an initializer, a "
            "Constant or static shape arithmetic); export the model with static shapes"
        )
    return np.asarray(value)


def static_ints(call: NodeCall, index: int, tensor: Any, what: str) -> list[int] | None:
    """Like :func:`static_value`, as a flat list of Python ints."""
    value = static_value(call, index, tensor, what)
    return None if value is None else [int(v) for v in value.reshape(-1)]


def static_floats(call: NodeCall, index: int, tensor: Any, what: str) -> list[float] | None:
    """Like :func:`static_value`, as a flat list of Python floats."""
    value = static_value(call, index, tensor, what)
    return None if value is None else [float(v) for v in value.reshape(-1)]


def axes_of(call: NodeCall, index: int, tensor: Any) -> list[int] | None:
    """Return the ``axes`` given as input ``index`` (newer opsets) or as attribute."""
    from_input = static_ints(call, index, tensor, "axes")
    if from_input is not None:
        return from_input
    value = call.attr("axes")
    return None if value is None else [int(v) for v in value]


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    """Turn negative axes into positive ones."""
    return [int(a) + rank if a < 0 else int(a) for a in axes]
