"""Registry of ONNX-op translators, keyed by (library, op type) and opset.

A translator is a small function built only from one library's own operators. It is
registered with :func:`register` and found with :func:`lookup`::

    @register("jax", "Relu")
    def relu(call: NodeCall, x):
        return jax.nn.relu(x)

Registering the same (library, op, since-version) twice is an error; a missing
translator raises :class:`~anpred.errors.MissingTranslatorError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anpred.errors import MissingTranslatorError


@dataclass(frozen=True)
class NodeCall:
    """What a translator gets to know about the ONNX node it translates.

    Attributes:
        op_type: ONNX op type, e.g. ``"Conv"``.
        name: Node name (unique in the graph).
        attrs: Attributes, decoded to Python values (ints, floats, lists, numpy arrays).
        opset: Opset version of the default domain.
        consts: For every input, its value when it is known at translation time
            (an initializer, a Constant, or static shape arithmetic), else ``None``.
            Missing optional inputs are ``None`` here and in the tensor arguments.
        input_shapes: Static shape of every input (from ONNX shape inference), or
            ``None`` when unknown.
        output_shapes: Static shape of every output, or ``None`` when unknown.
        library: Name of the library being translated to.
    """

    op_type: str
    name: str
    attrs: Mapping[str, Any]
    opset: int
    consts: tuple[np.ndarray | None, ...] = ()
    input_shapes: tuple[tuple[int, ...] | None, ...] = ()
    output_shapes: tuple[tuple[int, ...] | None, ...] = ()
    library: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def attr(self, key: str, default: Any = None) -> Any:
        """Return attribute ``key`` or ``default`` when the node does not set it."""
        return self.attrs.get(key, default)

    def const(self, index: int) -> np.ndarray | None:
        """Return the static value of input ``index`` (``None`` when dynamic or absent)."""
        return self.consts[index] if index < len(self.consts) else None


Translator = Callable[..., Any]

_REGISTRY: dict[tuple[str, str], list[tuple[int, Translator]]] = {}


def register(library: str, op_type: str, since: int = 1) -> Callable[[Translator], Translator]:
    """Register a translator for ``op_type`` in ``library`` valid from opset ``since``.

    Args:
        library: Library name (``"tensorflow"``, ``"jax"``, ``"paddle"``, ``"torch"``).
        op_type: ONNX op type.
        since: First opset this translator handles; a later registration with a
            higher ``since`` takes over from that opset on.

    Returns:
        A decorator that registers and returns the function unchanged.

    Raises:
        ValueError: When the same (library, op_type, since) is registered twice.
    """

    def decorate(fn: Translator) -> Translator:
        entries = _REGISTRY.setdefault((library, op_type), [])
        if any(existing == since for existing, _ in entries):
            raise ValueError(f"duplicate {library} translator for {op_type} (since opset {since})")
        entries.append((since, fn))
        entries.sort(key=lambda entry: entry[0])
        return fn

    return decorate


def lookup(library: str, op_type: str, opset: int, node: str = "?") -> Translator:
    """Return the translator of ``op_type`` for ``library`` at ``opset``.

    Raises:
        MissingTranslatorError: When no registered translator covers the op at that opset.
    """
    chosen = None
    for since, fn in _REGISTRY.get((library, op_type), []):
        if since <= opset:
            chosen = fn
    if chosen is None:
        raise MissingTranslatorError(op_type, opset, node, library)
    return chosen


def registered_ops(library: str) -> list[str]:
    """Return the op types that have a translator for ``library`` (sorted)."""
    return sorted(op for (lib, op) in _REGISTRY if lib == library)
