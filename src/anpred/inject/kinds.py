"""The built-in fault kinds: reduced-precision versions of one op.

=============  =========  ============================================  ======================
kind           acts on    what it does                                  severity
=============  =========  ============================================  ======================
``bf16``       output     round trip through bfloat16                   error scale (1 = exact
                                                                        round trip)
``fp16``       output     round trip through float16 (overflow → inf)   error scale
``mantissa``   output     truncate the float32 fraction to k bits       k, integer 0..22
``lowp_accum`` operands   operands of Conv/MatMul/Gemm rounded to       error scale
                          float16 before the op (fp16-input kernel with
                          fp32 accumulation)
``approx_act`` output     Sigmoid/Tanh/Erf/Exp replaced by a            table step h
                          piecewise-linear table of step h              (input units)
``eps``        attribute  epsilon of a normalization times a factor     factor (≠ 1)
=============  =========  ============================================  ======================

The error scale ``s`` of the round-trip kinds keeps the structure of the real rounding
error and changes its size: the faulty value is ``y + s·(rt(y) − y)``; ``s = 1`` is the
plain round trip.

A partial fault (``FaultSpec.partial``) keeps the clean value outside its selection:
``where(selected(y), faulty(y), y)`` on the clean output ``y`` (on each operand for
``lowp_accum``), where ``selected`` is ``|y| > K·rms(y)`` (``above:K``, rms over the whole
tensor) or the first ``ceil(F·C)`` channels (``channels:F``, output kinds only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from anpred.errors import UsageError
from anpred.inject.spec import ABOVE, FaultKind, FaultSpec, Target, register_fault

if TYPE_CHECKING:
    import onnx

    from anpred.inject.math import FaultMath


def _scaled(math_: FaultMath, x: Any, faulty: Any, scale: float) -> Any:
    return faulty if scale == 1 else math_.blend(x, faulty, float(scale))


def _partial(math_: FaultMath, spec: FaultSpec, value: Any, faulty: Any) -> Any:
    """The faulty tensor where ``spec.partial`` selects, the clean one elsewhere.

    Args:
        math_: The library's operations.
        spec: The fault (``partial`` ``None``: ``faulty`` as it is).
        value: The clean library value (its layout gives the channel axis).
        faulty: The faulty tensor (unwrapped, the dtype of ``value``'s tensor).

    The selection is computed on the clean tensor in float32 (a bfloat16/float16 one is
    widened, exactly); the unselected elements are the clean ones, bit for bit.

    Raises:
        UsageError: ``channels:F`` on a tensor whose channel count is not static.
    """
    selection = spec.selection
    if selection is None:
        return faulty
    clean = math_.unwrap(value)
    x = clean if math_.is_float32(clean) else math_.widen(clean)
    if selection.mode == ABOVE:
        mask = math_.above_rms(x, selection.value)
    else:
        shape = math_.shape(x)
        if len(shape) < 2:  # no channel axis: the tensor is one channel, ceil(F·1) = 1
            return faulty
        axis = math_.channel_axis(value)
        channels = shape[axis]
        if channels is None:
            raise UsageError(
                f"fault {spec.label}: {math_.library} cannot tell the channel count of a "
                f"tensor of shape {shape}"
            )
        count = selection.channel_count(channels)
        if count >= channels:
            return faulty
        mask = math_.first_channels(x, axis, count)
    return math_.where(mask, faulty, clean)


def _each_float(math_: FaultMath, spec: FaultSpec, values: Sequence[Any], fn: Any) -> list[Any]:
    """``fn`` (float32 → float32) applied to each float value, within ``spec.partial``."""
    out = []
    for value in values:
        if value is None:
            out.append(value)
            continue
        faulty = math_.faulted(math_.unwrap(value), fn)
        if faulty is None:
            out.append(value)
            continue
        out.append(math_.rewrap(value, _partial(math_, spec, value, faulty)))
    return out


class _RoundTrip(FaultKind):
    dtype: ClassVar[str] = ""
    severity_doc = "error scale: 1 = the exact round trip, 10 = ten times its error"

    def outputs(
        self,
        math_: FaultMath,
        spec: FaultSpec,
        op_type: str,
        inputs: Sequence[Any],
        values: Sequence[Any],
    ) -> list[Any]:
        return _each_float(
            math_,
            spec,
            values,
            lambda t: _scaled(math_, t, math_.round_trip(t, self.dtype), spec.severity),
        )


@register_fault
class BFloat16(_RoundTrip):
    """The op's output rounded to bfloat16 (8 significant bits) and back."""

    name = "bf16"
    dtype = "bfloat16"
    summary = "output round-tripped through bfloat16"


@register_fault
class Float16(_RoundTrip):
    """The op's output rounded to float16 (11 significant bits, max 65504) and back."""

    name = "fp16"
    dtype = "float16"
    summary = "output round-tripped through float16"


@register_fault
class Mantissa(FaultKind):
    """The op's output with its float32 fraction truncated to ``k`` bits (toward zero)."""

    name = "mantissa"
    default_severity = 10
    severity_doc = "fraction bits kept, integer 0..22 (float32 has 23; 7 ≈ bfloat16)"
    summary = "output fraction truncated to k bits"

    def check_severity(self, severity: float) -> None:
        if (
            isinstance(severity, bool)
            or not float(severity).is_integer()
            or not 0 <= severity <= 22
        ):
            raise UsageError(
                f"fault mantissa: severity is the number of fraction bits kept, "
                f"an integer 0..22, not {severity!r}"
            )

    def outputs(
        self,
        math_: FaultMath,
        spec: FaultSpec,
        op_type: str,
        inputs: Sequence[Any],
        values: Sequence[Any],
    ) -> list[Any]:
        bits = int(spec.severity)
        return _each_float(math_, spec, values, lambda t: math_.truncate_mantissa(t, bits))


@register_fault
class LowPrecisionAccumulation(FaultKind):
    """Operands of a Conv/MatMul/Gemm rounded to float16; the op then runs in float32.

    Models an fp16-input kernel with fp32 accumulation (the common CPU/GPU fp16 path): the
    products see float16 operands. Data and weights are rounded, the bias is not (it is
    added in the accumulator).
    """

    name = "lowp_accum"
    target = Target.INPUT
    ops = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm"})
    severity_doc = "error scale of the float16 operand rounding (1 = exact float16 operands)"
    summary = "Conv/MatMul/Gemm operands rounded to float16"

    def inputs(
        self, math_: FaultMath, spec: FaultSpec, op_type: str, values: Sequence[Any]
    ) -> list[Any]:
        operands = _each_float(
            math_,
            spec,
            values[:2],
            lambda t: _scaled(math_, t, math_.round_trip(t, "float16"), spec.severity),
        )
        return [*operands, *values[2:]]


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


#: Op → (exact function in float64, table range). Outside the range the table clamps;
#: the ranges are where the function is within float32 rounding of its limits, except
#: Exp, whose range is float32's (exp(±88) is near the largest/smallest normal).
_FUNCTIONS: dict[str, tuple[Any, float, float]] = {
    "Sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), -20.0, 20.0),
    "Tanh": (np.tanh, -10.0, 10.0),
    "Erf": (_erf, -6.0, 6.0),
    "Exp": (np.exp, -88.0, 88.0),
}


def activation_table(op_type: str, step: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Piecewise-linear table of ``op_type``: (start, values, slopes), float32 arrays.

    Knots are ``start + i*step``; ``values[i]`` is the exact function there (rounded to
    float32) and ``slopes[i] = values[i+1] - values[i]``, so that the interpolant is
    ``values[i] + frac * slopes[i]``. Its largest error is about ``step² / 8 · max|f''|``.
    """
    fn, lo, hi = _FUNCTIONS[op_type]
    n = int(math.ceil((hi - lo) / step))
    knots = lo + step * np.arange(n + 1, dtype=np.float64)
    exact = fn(knots).astype(np.float32)
    return lo, exact[:-1].copy(), (exact[1:].astype(np.float64) - exact[:-1]).astype(np.float32)


@register_fault
class ApproximateActivation(FaultKind):
    """Sigmoid/Tanh/Erf/Exp computed by a cheap piecewise-linear table of step ``h``.

    The output is recomputed from the op's input (the exact output is discarded), with a
    clip, a floor, two gathers and one multiply-add: the kind of table lookup fast
    activation kernels use. Largest error (measured on a dense grid), for h = 0.05 / 0.25
    / 0.5 / 1: Sigmoid 3.0e-5 / 7.5e-4 / 3.0e-3 / 1.2e-2, Tanh 2.4e-4 / 6.0e-3 / 2.3e-2 /
    8.2e-2, Erf 3.0e-4 / 7.4e-3 / 3.0e-2 / 1.0e-1 (absolute); Exp 3.1e-4 / 7.8e-3 /
    3.2e-2 / 1.3e-1 (relative, ≈ h²/8).
    """

    name = "approx_act"
    ops = frozenset(_FUNCTIONS)
    needs_inputs = True
    default_severity = 0.25
    severity_doc = "table step h in input units (0 < h <= 4; error grows like h²)"
    summary = "activation replaced by a piecewise-linear table"

    def check_severity(self, severity: float) -> None:
        super().check_severity(severity)
        if severity > 4:
            raise UsageError(
                f"fault approx_act: the table step must be at most 4, not {severity!r}"
            )

    def outputs(
        self,
        math_: FaultMath,
        spec: FaultSpec,
        op_type: str,
        inputs: Sequence[Any],
        values: Sequence[Any],
    ) -> list[Any]:
        start, table, slopes = activation_table(op_type, float(spec.severity))
        x = math_.unwrap(inputs[0])
        y = math_.faulted(
            x, lambda v: math_.lookup_linear(v, start, float(spec.severity), table, slopes)
        )
        if y is None:
            return list(values)
        if math_.is_reduced(x):  # the table's value in the output's dtype
            y = math_.narrow(math_.widen(y), math_.unwrap(values[0]))
        return [math_.rewrap(values[0], _partial(math_, spec, values[0], y)), *values[1:]]


#: Default epsilon of each normalization op (ONNX).
_EPSILON_DEFAULTS = {
    "BatchNormalization": 1e-5,
    "LayerNormalization": 1e-5,
    "InstanceNormalization": 1e-5,
    "GroupNormalization": 1e-5,
}


@register_fault
class Epsilon(FaultKind):
    """The ``epsilon`` attribute of a normalization multiplied by a factor.

    Applied to the ONNX graph for every library (the node then runs with the library's
    own normalization kernel, as a library with a different epsilon default would).
    """

    name = "eps"
    target = Target.ATTRIBUTE
    ops = frozenset(_EPSILON_DEFAULTS)
    default_severity = 100.0
    severity_doc = "factor applied to epsilon (> 0, not 1)"
    summary = "normalization epsilon multiplied by a factor"

    def check_severity(self, severity: float) -> None:
        super().check_severity(severity)
        if severity == 1:
            raise UsageError("fault eps: a factor of 1 changes nothing")

    def rewrite_node(self, node: onnx.NodeProto, spec: FaultSpec) -> None:
        from onnx import helper

        old = _EPSILON_DEFAULTS[node.op_type]
        for attr in node.attribute:
            if attr.name == "epsilon":
                old = attr.f
                node.attribute.remove(attr)
                break
        node.attribute.append(helper.make_attribute("epsilon", float(old * spec.severity)))
