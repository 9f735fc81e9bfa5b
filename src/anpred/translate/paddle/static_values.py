"""Operands a paddle kernel needs as Python values (shapes, axes, pads, repeats).

An operand known at translation time (an initializer, a Constant, folded shape arithmetic)
is read from :meth:`NodeCall.const`. One computed at run time is read from the tensor
itself when paddle runs eagerly (dynamic mode: the value exists, as in the torch
translators); while a static Program is being built it does not, and the translator
raises a one-line error instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle

from anpred.errors import UsageError
from anpred.translate.registry import NodeCall


def static_value(call: NodeCall, index: int, what: str, value: Any = None) -> np.ndarray:
    """Return input ``index``'s value: static, else the eager tensor ``value``'s.

    Args:
        call: The node.
        index: Input position.
        what: What the operand is (for the error message).
        value: The run-time tensor of that input (``None`` when not handed over).

    Raises:
        UsageError: When the value is neither static nor readable (static-graph mode).
    """
    static = call.const(index)
    if static is not None:
        return static
    if value is not None and paddle.in_dynamic_mode():
        return np.asarray(value.numpy())
    raise UsageError(f"node {call.name}: {call.op_type} {what} must be static")


def ints(value: Any) -> list[int]:
    """``value`` flattened to a list of Python ints."""
    return [int(v) for v in np.asarray(value).reshape(-1)]


def optional_value(call: NodeCall, index: int, value: Any = None) -> np.ndarray | None:
    """Input ``index``'s static or eager value, or ``None`` where it is absent or unreadable
    (static-graph mode), for operands a translator can do without (Resize roi / scales).
    """
    static = call.const(index)
    if static is not None:
        return static
    if value is not None and paddle.in_dynamic_mode():
        return np.asarray(value.numpy())
    return None
