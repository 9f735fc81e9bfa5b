"""Ideal reduced-precision arithmetic, emulated in float64: the precision classes' references.

The ideal reference of a precision class (:mod:`anpred.library.precision`) is the fp64
model with every operator's result rounded to the class's format, and the operands of
convolutions and matrix products (input, weight, bias) rounded to it too: what a correct
implementation that computes every operator in that format, with exact (or wide)
accumulation, returns. Its distance from the fp64 reference is the error that format
costs on this model and input, the floor a participant of the class is judged against
(``docs/oracle.md``).

Rounding is round-to-nearest-even, by a cast to the format and back (``bfloat16`` and
``float16``: torch's casts; ``tf32``: float32 with its mantissa rounded to 10 bits). It is
idempotent, so a value rounded twice is rounded once. The ``weights`` scope rounds the
module's parameters and floating buffers once and leaves arithmetic in float64.

Only worker processes import this module (it imports torch).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from anpred.errors import UsageError

#: Formats this module emulates → the torch dtype a cast goes through (tf32: none).
_CAST: dict[str, torch.dtype | None] = {
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "tf32": None,
}

#: Operators whose operands are rounded too (convolutions and matrix products: the
#: operators a reduced-precision library runs on reduced-precision operands).
OPERAND_OPS = frozenset(
    {
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "convolution",
        "_convolution",
        "linear",
        "matmul",
        "__matmul__",
        "__rmatmul__",
        "mm",
        "bmm",
        "addmm",
        "addbmm",
        "baddbmm",
        "einsum",
        "tensordot",
        "scaled_dot_product_attention",
    }
)

#: Low mantissa bits of float32 that tf32 drops (23 - 10).
_TF32_DROPPED = 13


def rounder(fmt: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function that rounds a floating tensor to ``fmt`` (same dtype back).

    Raises:
        UsageError: ``fmt`` is not an emulated format.
    """
    if fmt not in _CAST:
        raise UsageError(f"cannot emulate {fmt!r}; choose from {', '.join(sorted(_CAST))}")
    cast = _CAST[fmt]
    if cast is not None:
        return lambda x: x.to(cast).to(x.dtype)

    def tf32(x: torch.Tensor) -> torch.Tensor:
        bits = x.to(torch.float32).view(torch.int32)
        lsb = (bits >> _TF32_DROPPED) & 1
        half = (1 << (_TF32_DROPPED - 1)) - 1
        keep = ~((1 << _TF32_DROPPED) - 1)
        rounded = ((bits + half + lsb) & keep).view(torch.float32)
        # inf and NaN keep their bits (the carry would corrupt them)
        return torch.where(torch.isfinite(x), rounded.to(x.dtype), x)

    return tf32


def _floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _storage(value: torch.Tensor) -> int | None:
    try:
        return value.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without storage (tracing)
        return None


def _tensors(tree: Any) -> Iterable[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, list | tuple):
        for item in tree:
            yield from _tensors(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _tensors(item)


class RoundingMode(TorchFunctionMode):
    """A torch function mode that rounds every operator's floating results to a format.

    Args:
        fmt: ``bf16``/``bfloat16``, ``fp16``/``float16`` or ``tf32``.
        scope: ``all`` (every result, and conv/matmul operands) or ``matmul`` (conv/matmul
            operands and results only).

    A result that is a view of an input (same storage) holds values already rounded and is
    returned as it is, so views keep aliasing; an in-place operator's result is rounded in
    place.
    """

    def __init__(self, fmt: str, scope: str = "all") -> None:
        super().__init__()
        if scope not in ("all", "matmul"):
            raise UsageError(f"the rounding mode's scope is all or matmul, not {scope!r}")
        self.round = rounder(fmt)
        self.scope = scope
        self.calls = 0

    def _operands(self, tree: Any) -> Any:
        if _floating(tree):
            return self.round(tree)
        if isinstance(tree, list | tuple):
            return type(tree)(self._operands(item) for item in tree)
        if isinstance(tree, dict):
            return {k: self._operands(v) for k, v in tree.items()}
        return tree

    def _result(self, value: Any, inputs: dict[int, torch.Tensor], storages: set[int]) -> Any:
        if _floating(value):
            if id(value) in inputs:  # in place: the input now holds a new result
                value.copy_(self.round(value))
                return value
            storage = _storage(value)
            if storage is not None and storage in storages:  # a view of a rounded input
                return value
            return self.round(value)
        if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
            return type(value)(self._result(v, inputs, storages) for v in value)
        return value

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        operands = name in OPERAND_OPS
        if operands:
            args, kwargs = self._operands(args), self._operands(kwargs)
        result = func(*args, **kwargs)
        if self.scope == "all" or operands:
            self.calls += 1
            given = [t for t in _tensors((args, kwargs)) if t.is_floating_point()]
            storages = {s for s in map(_storage, given) if s is not None}
            result = self._result(result, {id(t): t for t in given}, storages)
        return result


def round_weights(module: torch.nn.Module, fmt: str) -> int:
    """Round ``module``'s parameters and floating buffers to ``fmt`` in place; return how
    many tensors were rounded.
    """
    rnd = rounder(fmt)
    count = 0
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            if tensor.is_floating_point():
                tensor.copy_(rnd(tensor))
                count += 1
    return count


def check_emulation(settings: dict[str, Any] | Any) -> tuple[str | None, str]:
    """``(format, scope)`` of an ``emulate`` setting (``(None, "all")`` without one).

    Raises:
        UsageError: An unknown format or scope, or emulation outside a float64 run.
    """
    fmt = settings.get("emulate")
    scope = str(settings.get("emulate_scope", "all"))
    if fmt is None:
        return None, scope
    rounder(str(fmt))
    if scope not in ("all", "matmul", "weights"):
        raise UsageError(f"emulate_scope must be all, matmul or weights, not {scope!r}")
    if settings.get("dtype") != "float64":
        raise UsageError("emulating a precision needs a float64 run (dtype float64)")
    if settings.get("compile") or settings.get("autocast"):
        raise UsageError("emulating a precision excludes compile and autocast")
    return str(fmt), scope
