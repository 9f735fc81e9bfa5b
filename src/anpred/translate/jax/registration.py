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
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

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


def register(op_type: str, since: int = 1) -> Callable[[Translator], Translator]:
    """Register a jax translator for ``op_type`` from opset ``since`` (see the module doc).

    Returns:
        A decorator that registers the translator (wrapped, unless the op only moves
        values) and returns the function unchanged.
    """

    def decorate(fn: Translator) -> Translator:
        if op_type in PASS_THROUGH:
            register_translator(_LIB, op_type, since)(fn)
            return fn

        @functools.wraps(fn)
        def translated(call: NodeCall, *args: Any) -> Any:
            if numerics.current().float_dtype == "bfloat16":
                args = round_operands(args)
            return fn(call, *args)

        register_translator(_LIB, op_type, since)(translated)
        return fn

    return decorate
