"""Float64 references and float32 noise of conformance cases, and deviation metrics.

The reference of a case is the ONNX reference evaluator (with :func:`evaluate`'s fixes)
run on the case's float64 copy; its float32 noise is how far two independent float32
executions (onnxruntime, the reference evaluator) lie from it. Imports no DL library
except onnxruntime, inside the functions that run it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from conformance.cases import OpCase, build_model, case_feeds


@dataclass(frozen=True)
class Deviation:
    """How far one tensor lies from its reference.

    Attributes:
        rel_l2: ``||y - ref||_2 / ||ref||_2`` (``inf`` when ``ref`` is 0 and ``y`` is not).
        max_abs_rel: ``max|y - ref| / max|ref|`` (same convention).
    """

    rel_l2: float
    max_abs_rel: float

    def worst(self, other: Deviation) -> Deviation:
        """Return the element-wise maximum of two deviations."""
        return Deviation(max(self.rel_l2, other.rel_l2), max(self.max_abs_rel, other.max_abs_rel))


def ratio(num: float, den: float) -> float:
    """Return ``num / den`` with 0/0 = 0 and x/0 = inf."""
    if den > 0:
        return num / den
    return 0.0 if num == 0 else math.inf


def deviation(actual: np.ndarray, reference: np.ndarray) -> Deviation:
    """Measure ``actual`` against ``reference`` (same shape) in float64."""
    ref = np.asarray(reference, dtype=np.float64)
    diff = np.asarray(actual, dtype=np.float64) - ref
    if ref.size == 0:
        return Deviation(0.0, 0.0)
    if not np.all(np.isfinite(diff)):
        return Deviation(math.inf, math.inf)
    return Deviation(
        ratio(float(np.linalg.norm(diff)), float(np.linalg.norm(ref))),
        ratio(float(np.max(np.abs(diff))), float(np.max(np.abs(ref)))),
    )


@dataclass(frozen=True)
class CaseReference:
    """Float64 reference outputs of a case and the float32 noise around them.

    Attributes:
        outputs: Reference outputs (ReferenceEvaluator, float64 model).
        noise: Per output, the worst deviation of the float32 executions.
        notes: What could not be measured (e.g. onnxruntime rejected the model).
    """

    outputs: tuple[np.ndarray, ...]
    noise: tuple[Deviation, ...]
    notes: tuple[str, ...] = ()


def _onnxruntime_outputs(model: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return [np.asarray(v) for v in session.run(None, dict(feeds))]


@cache
def _evaluator_fixes() -> tuple[type, ...]:
    """Op implementations that replace the reference evaluator's own.

    onnx 1.23 evaluates Erf as ``np.vectorize(math.erf, otypes=["f"])``: float32 even for
    float64 inputs, which would make the float64 reference of Erf float32-accurate. Its
    ConvTranspose with ``group`` > 1 slices the weight by output channels instead of input
    channels (and adds the bias once per group); the fix runs each group (input channels
    ``C/group``, weight rows ``C/group``, bias ``M/group``) through its ``group=1`` code.
    Its LRN loops over the batch axis instead of the channels (only channel 0 of a batch of
    one gets its square sum) and divides alpha by size in float32; the fix is ONNX's formula
    over every channel, in the input's precision.
    """
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops._op import OpRunUnaryNum
    from onnx.reference.ops.op_conv_transpose import ConvTranspose as _ConvTranspose

    class Erf(OpRunUnaryNum):
        op_domain = ""

        def _run(self, x: np.ndarray) -> tuple[np.ndarray]:
            return (np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype),)

    class ConvTranspose(_ConvTranspose):
        op_domain = ""

        def _run(self, X, W, B=None, **attrs):  # type: ignore[no-untyped-def]  # noqa: N803
            group = int(attrs.get("group") or 1)
            if group == 1:
                return super()._run(X, W, B, **attrs)
            attrs["group"] = 1
            c, m = X.shape[1] // group, W.shape[1]
            parts = [
                super(ConvTranspose, self)._run(
                    X[:, g * c : (g + 1) * c], W[g * c : (g + 1) * c],
                    None if B is None else B[g * m : (g + 1) * m], **attrs,
                )[0]
                for g in range(group)
            ]  # fmt: skip
            return (np.concatenate(parts, axis=1).astype(X.dtype),)

    class LRN(OpRun):
        op_domain = ""

        def _run(self, x, alpha=None, beta=None, bias=None, size=None):  # type: ignore[no-untyped-def]
            before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
            channels = x.shape[1]
            square_sum = np.zeros_like(x)
            for c in range(channels):
                window = x[:, max(0, c - before) : min(channels, c + after + 1)]
                square_sum[:, c] = np.sum(window**2, axis=1)
            # attributes arrive as numpy float32: alpha / size in Python floats keeps the
            # float64 reference float64
            scale = float(alpha) / int(size)
            y = x / (float(bias) + scale * square_sum) ** float(beta)
            return (y.astype(x.dtype),)

    return (Erf, ConvTranspose, LRN)


def evaluate(model: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run ``model`` with the ONNX reference evaluator (with :func:`_evaluator_fixes`)."""
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(model, new_ops=list(_evaluator_fixes()))
    return [np.asarray(v) for v in evaluator.run(None, dict(feeds))]


def measure_reference(case: OpCase, use_onnxruntime: bool = True) -> CaseReference:
    """Compute the float64 reference of ``case`` and its float32 noise.

    Args:
        case: The case.
        use_onnxruntime: Include onnxruntime among the float32 executions (off only where a
            process must not load it, e.g. DL-free unit tests; cases whose reference is
            onnxruntime load it regardless).

    Returns:
        The reference outputs and per-output noise.
    """
    model64, feeds64 = build_model(case, np.float64), case_feeds(case, np.float64)
    if case.reference == "onnxruntime":
        reference = _onnxruntime_outputs(model64, feeds64)
    else:
        reference = evaluate(model64, feeds64)
    model32, feeds32 = build_model(case, np.float32), case_feeds(case, np.float32)
    executions: dict[str, Callable[[], list[np.ndarray]]] = {}
    if case.reference == "onnx":  # else the evaluator is known to be wrong for this case
        executions["reference evaluator"] = lambda: evaluate(model32, feeds32)
    if use_onnxruntime:
        executions["onnxruntime"] = lambda: _onnxruntime_outputs(model32, feeds32)
    noise = [Deviation(0.0, 0.0) for _ in reference]
    notes = []
    for source, execute in executions.items():
        try:
            outputs = execute()
        except Exception as exc:  # noqa: BLE001 - a noise source may not support a case
            notes.append(f"{source} float32 failed: {type(exc).__name__}")
            continue
        for index, (out, ref) in enumerate(zip(outputs, reference, strict=True)):
            if np.shape(out) != ref.shape:
                notes.append(f"{source} float32 shape {np.shape(out)} != {ref.shape}")
                continue
            noise[index] = noise[index].worst(deviation(np.asarray(out), ref))
    return CaseReference(tuple(reference), tuple(noise), tuple(notes))
