"""Registering jax translators; in the bf16 compute mode, graph inputs round where they are used.

In the bf16 mode the adapter feeds graph inputs as float32, exactly as given
(:meth:`~anpred.translate.jax.adapter.JaxAdapter.feed`): a packed input
(:mod:`anpred.interchange.packing`) carries integer tensors -- token ids, attention masks
-- in one float32 vector, and bfloat16 holds integers exactly only up to 256. The packed
vector's unpacking (``Slice`` + ``Reshape`` + ``Cast``) and the other pure data-movement
ops in :data:`PASS_THROUGH` move float32 values unchanged, so a ``Cast`` to an integer type
receives the exact values; every other op rounds its float32 operands to bfloat16 before it
computes. In a bf16 graph every other float is already bfloat16 (constants, ``Cast``
results), so the rounding touches graph inputs (and the float tensors unpacked from them)
only: each is rounded once, at its first computing op, as it was when inputs were rounded
on entry. In float32 and float64 graphs the translators are called unchanged.

Shape arithmetic that the build-time folding leaves to run time (its shapes were unknown
to ONNX shape inference, e.g. in the expanded function bodies of Attention) is evaluated
while tracing instead: ``Shape`` returns a NumPy array (jax shapes are static), an integer
op whose operands are all known while tracing runs under ``jax.ensure_compile_time_eval``,
and a translator that needs a static input (:func:`~anpred.translate.jax.static.static_value`)
accepts such a value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from anpred.translate.jax import numerics
from anpred.translate.registry import NodeCall, Translator
from anpred.translate.registry import register as register_translator

_LIB = "jax"

#: Ops that only move values: they pass float32 graph inputs through unrounded.
PASS_THROUGH = frozenset(
    {"Cast", "Flatten", "Identity", "Reshape", "Slice", "Squeeze", "Unsqueeze"}
)


def round_operands(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Return ``args`` with every float32 array rounded to bfloat16 (others unchanged)."""
    return tuple(
        a.astype(jnp.bfloat16) if getattr(a, "dtype", None) == jnp.float32 else a for a in args
    )


def _concrete(value: Any) -> bool:
    """Whether ``value`` is an array known while tracing (not a ``jax.jit`` tracer)."""
    return hasattr(value, "dtype") and not isinstance(value, jax.core.Tracer)


def _shape_arithmetic(call: NodeCall, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The operands of an integer op on values known while tracing, else ``None``.

    Operands that are build-time constants (passed to ``jax.jit`` as traced inputs) are
    replaced by their values; at least one operand must be a value computed while tracing
    (a ``Shape`` result and what follows from it).
    """
    present = [(i, a) for i, a in enumerate(args) if a is not None]
    if not present or not any(_concrete(a) for _, a in present):
        return None
    if not all(jnp.issubdtype(a.dtype, jnp.integer) or a.dtype == jnp.bool_ for _, a in present):
        return None
    values = list(args)
    for i, a in present:
        if not _concrete(a):
            const = call.const(i)
            if const is None:
                return None
            values[i] = np.asarray(const).astype(a.dtype)
    return tuple(values)


def register(op_type: str, since: int = 1) -> Callable[[Translator], Translator]:
    """Register a jax translator for ``op_type`` from opset ``since`` (see the module doc).

    Returns:
        A decorator that registers the translator (wrapped) and returns the function
        unchanged.
    """

    def decorate(fn: Translator) -> Translator:
        moves = op_type in PASS_THROUGH

        @functools.wraps(fn)
        def translated(call: NodeCall, *args: Any) -> Any:
            known = _shape_arithmetic(call, args)
            if known is not None:
                with jax.ensure_compile_time_eval():
                    return fn(call, *known)
            if not moves and numerics.current().float_dtype == "bfloat16":
                args = round_operands(args)
            return fn(call, *args)

        register_translator(_LIB, op_type, since)(translated)
        return fn

    return decorate
