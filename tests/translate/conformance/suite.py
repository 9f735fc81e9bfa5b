"""Op conformance suite: every library's translators, op by op, against float64 ONNX.

Each case of :mod:`conformance.catalog` is a one-node ONNX model. Its
reference is :class:`onnx.reference.ReferenceEvaluator` run on a float64 copy of the model
and of the (float32-representable) inputs. A library's translation of the float32 model is
compared with that reference in two deviation metrics, relative L2
(``||y - ref|| / ||ref||``) and max-abs relative (``max|y - ref| / max|ref|``).

Tolerance rule (one rule for every op, never tuned per op):

* For each case and output the **float32 noise** is measured: the deviation from the
  float64 reference of two independent float32 executions of the same model, onnxruntime
  and the ONNX reference evaluator; per metric, the larger of the two is the noise.
* A library passes when, in both metrics,
  ``deviation <= max(TOLERANCE_FACTOR * noise, NOISE_FLOOR)``.
* :data:`TOLERANCE_FACTOR` = 10: a third correct float32 implementation may sum in another
  order or use other vectorised approximations of exp/erf/tanh, which moves its error by a
  small factor from the two implementations measured. Precision errors stay visible above
  it: with mutated torch translators, BatchNormalization/LayerNormalization with epsilon
  10x too large deviate 1e-5 to 7e-2 (tolerances <= 8e-6), Conv/MatMul/Softmax on
  float16-rounded inputs 1e-4 to 1e-3, Sigmoid rounded to bfloat16 1e-3, and Exp with a
  2e-6 relative bias 2e-6 (tolerance 4.8e-7); semantic errors (padding, rounding modes,
  axes) are far larger still.
* :data:`NOISE_FLOOR` = ``FLOOR_ULPS`` (4) float32 epsilons (4.8e-7): where both float32
  executions are exact (Relu, Reshape, Gather ...) the noise is 0, and the floor admits a
  library that rounds a few ulps differently without admitting any semantic error.
* A noise above :data:`NOISE_CEILING` (1e-4) means the float32 executions disagree with the
  reference about semantics; the case is reported as an error rather than judged.

Where the ONNX reference evaluator is known to be wrong for a variant (see the catalogue),
the case names onnxruntime, run on the float64 model, as its reference instead.

Layouts: when the adapter reports a channels-last layout (``"NHWC"``) for an output, it is
moved back to channels-first before comparison.

Command line::

    python -m conformance.suite --library jax [--json out.json] [--ops Conv,Relu]

prints one row per case and exits 1 when a case fails, errors, or (unless
``--allow-missing``) has no translator.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from conformance.cases import (
    OpCase,
    all_cases,
    build_model,
    case_feeds,
    output_names,
)
from conformance.reference import (
    CaseReference,
    Deviation,
    deviation,
    evaluate,
    measure_reference,
    ratio,
)

__all__ = [
    "NOISE_CEILING",
    "NOISE_FLOOR",
    "TOLERANCE_FACTOR",
    "CaseReference",
    "CaseResult",
    "CaseStatus",
    "Deviation",
    "check_case",
    "deviation",
    "evaluate",
    "measure_reference",
    "run_cases",
    "run_library",
    "tolerance",
]

#: Tolerance = TOLERANCE_FACTOR x measured float32 noise (see the module docstring).
TOLERANCE_FACTOR = 10.0
#: Ulps of float32 granted when the measured noise is smaller (e.g. exactly 0).
FLOOR_ULPS = 4
#: Lowest tolerance, in both metrics: FLOOR_ULPS float32 epsilons.
NOISE_FLOOR = FLOOR_ULPS * float(np.finfo(np.float32).eps)
#: Measured noise above this means a float32 execution disagrees with the reference about
#: the op's semantics (the largest genuine noise of the catalogue is below 1e-6); such a
#: case is an error, never a pass under an inflated tolerance.
NOISE_CEILING = 1e-4

LIBRARIES = ("torch", "tensorflow", "jax", "paddle")


def tolerance(noise: float) -> float:
    """Return the tolerance of one metric given its measured float32 noise."""
    return max(TOLERANCE_FACTOR * noise, NOISE_FLOOR)


class CaseStatus(Enum):
    """Outcome of one case for one library."""

    PASSED = "passed"
    FAILED = "failed"
    MISSING = "missing"
    ERROR = "error"


@dataclass(frozen=True)
class CaseResult:
    """One case run through one library's translators.

    Attributes:
        op: ONNX op type.
        case_id: Case name.
        library: Library name.
        status: Outcome.
        rel_l2: Relative L2 deviation from the float64 reference (worst output).
        max_abs_rel: Max-abs relative deviation (same output).
        rel_l2_tol: Tolerance of ``rel_l2``.
        max_abs_tol: Tolerance of ``max_abs_rel``.
        noise_rel_l2: Measured float32 noise, relative L2.
        noise_max_abs_rel: Measured float32 noise, max-abs relative.
        message: Why a case failed, errored or is missing, and measurement notes.
    """

    op: str
    case_id: str
    library: str
    status: CaseStatus
    rel_l2: float | None = None
    max_abs_rel: float | None = None
    rel_l2_tol: float | None = None
    max_abs_tol: float | None = None
    noise_rel_l2: float | None = None
    noise_max_abs_rel: float | None = None
    message: str = ""

    @property
    def passed(self) -> bool:
        """Whether the case passed."""
        return self.status is CaseStatus.PASSED

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (``inf`` deviations become the string "inf")."""
        record = asdict(self)
        record["status"] = self.status.value
        for key, value in record.items():
            if isinstance(value, float) and not math.isfinite(value):
                record[key] = str(value)
        return record


def _to_onnx_layout(adapter: Any, value: Any) -> np.ndarray:
    layout = adapter.layout(value)
    array = np.asarray(adapter.to_numpy(value))
    if layout.startswith("NC") or array.ndim < 3:
        return array
    if layout[0] == "N" and layout[-1] == "C" and len(layout) == array.ndim:
        return np.moveaxis(array, -1, 1)
    raise ValueError(f"unknown layout {layout!r} for a {array.ndim}-D output")


def _compare(
    op: str, case_id: str, library: str, actual: Sequence[np.ndarray], reference: CaseReference
) -> CaseResult:
    worst: tuple[float, Deviation, Deviation] | None = None
    messages = list(reference.notes)
    status = CaseStatus.PASSED
    for index, (out, ref, noise) in enumerate(
        zip(actual, reference.outputs, reference.noise, strict=True)
    ):
        if out.shape != ref.shape:
            message = f"output {index}: shape {out.shape} != {ref.shape}"
            return CaseResult(op, case_id, library, CaseStatus.FAILED, message=message)
        kinds = {out.dtype.kind, ref.dtype.kind}
        if kinds != {ref.dtype.kind} and kinds != {"i", "u"}:
            message = f"output {index}: dtype {out.dtype} != {ref.dtype}"
            return CaseResult(op, case_id, library, CaseStatus.FAILED, message=message)
        if max(noise.rel_l2, noise.max_abs_rel) > NOISE_CEILING:
            message = (
                f"output {index}: float32 executions disagree with the reference "
                f"(noise {noise.rel_l2:.1e}); the reference is suspect"
            )
            return CaseResult(op, case_id, library, CaseStatus.ERROR, message=message)
        dev = deviation(out, ref)
        tol = Deviation(tolerance(noise.rel_l2), tolerance(noise.max_abs_rel))
        score = max(ratio(dev.rel_l2, tol.rel_l2), ratio(dev.max_abs_rel, tol.max_abs_rel))
        if not (dev.rel_l2 <= tol.rel_l2 and dev.max_abs_rel <= tol.max_abs_rel):
            status = CaseStatus.FAILED
            messages.insert(0, f"output {index} beyond tolerance")
        if worst is None or score > worst[0]:
            worst = (score, dev, noise)
    assert worst is not None
    _, dev, noise = worst
    return CaseResult(
        op, case_id, library, status, dev.rel_l2, dev.max_abs_rel,
        tolerance(noise.rel_l2), tolerance(noise.max_abs_rel), noise.rel_l2, noise.max_abs_rel,
        "; ".join(messages),
    )  # fmt: skip


def check_case(case: OpCase, adapter: Any, reference: CaseReference) -> CaseResult:
    """Run ``case`` through ``adapter``'s library and judge it against ``reference``.

    Args:
        case: The case.
        adapter: A :class:`~anpred.translate.adapter.LibraryAdapter` whose translators are
            registered.
        reference: The case's float64 reference and noise.

    Returns:
        The case's result (missing translators and exceptions become results too).
    """
    from anpred.errors import MissingTranslatorError
    from anpred.translate.graph import GraphProgram

    library = adapter.name
    try:
        program = GraphProgram(build_model(case, np.float32), adapter)
        values = program.run(case_feeds(case, np.float32))
        actual = [_to_onnx_layout(adapter, values[name]) for name in output_names(case)]
    except MissingTranslatorError as exc:
        return CaseResult(case.op, case.case_id, library, CaseStatus.MISSING, message=str(exc))
    except Exception as exc:  # noqa: BLE001 - any library failure is this case's result
        first_line = (str(exc).strip().splitlines() or [""])[0][:200]
        return CaseResult(case.op, case.case_id, library, CaseStatus.ERROR,
                          message=f"{type(exc).__name__}: {first_line}")  # fmt: skip
    return _compare(case.op, case.case_id, library, actual, reference)


def run_cases(
    cases: Sequence[OpCase],
    adapter: Any,
    references: Mapping[str, CaseReference],
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case through one adapter (in this process).

    Args:
        cases: The cases.
        adapter: The library adapter.
        references: Reference of every case, by :attr:`OpCase.key`.
        on_result: Called with each result as soon as it is known (progress).

    Returns:
        One result per case, in order.
    """
    results = []
    for case in cases:
        result = check_case(case, adapter, references[case.key])
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def make_library_adapter(library: str, settings: Mapping[str, Any] | None = None) -> Any:
    """Import ``anpred.translate.<library>`` (registering its translators); return its adapter.

    Raises:
        UsageError: When the library has no translator package.
    """
    from anpred.errors import UsageError

    package = f"anpred.translate.{library}"
    try:
        module = importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if exc.name is not None and package.startswith(exc.name):
            raise UsageError(f"library '{library}' has no translator package {package}") from exc
        raise
    return module.make_adapter(settings)


def run_library(
    library: str,
    settings: Mapping[str, Any] | None = None,
    ops: Sequence[str] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run the conformance suite for one library in the current process.

    The references (and onnxruntime) are computed before the library is imported.

    Args:
        library: ``torch``, ``tensorflow``, ``jax`` or ``paddle``.
        settings: Adapter settings (e.g. ``{"dtype": "float64"}``).
        ops: Only these op types (default: every op of the catalogue).
        on_result: Progress callback, called with each result.

    Returns:
        One result per case.
    """
    cases = all_cases(ops)
    references = {case.key: measure_reference(case) for case in cases}
    adapter = make_library_adapter(library, settings)
    return run_cases(cases, adapter, references, on_result)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def format_row(result: CaseResult) -> str:
    """One table row: op, case, status, deviations against tolerances, message."""
    return (
        f"{result.op:<19} {result.case_id:<26} {result.status.value:<7} "
        f"{_fmt(result.rel_l2):>9} {_fmt(result.rel_l2_tol):>9} "
        f"{_fmt(result.max_abs_rel):>9} {_fmt(result.max_abs_tol):>9}  {result.message}"
    )


TABLE_HEADER = (
    f"{'op':<19} {'case':<26} {'status':<7} {'rel_l2':>9} {'tol':>9} {'max_abs':>9} {'tol':>9}"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    from anpred.errors import AnpredError

    parser = argparse.ArgumentParser(prog="python -m conformance.suite")
    parser.add_argument("--library", required=True, choices=LIBRARIES)
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--ops", help="comma-separated op types (default: all)")
    parser.add_argument(
        "--settings", default="{}", help='adapter settings as JSON, e.g. {"dtype": "float64"}'
    )
    parser.add_argument("--allow-missing", action="store_true",
                        help="exit 0 when the only problems are missing translators")  # fmt: skip
    args = parser.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",")] if args.ops else None
    known = {case.op for case in all_cases()}
    if ops is not None and not set(ops) <= known:
        parser.error(f"unknown ops: {', '.join(sorted(set(ops) - known))}")
    print(TABLE_HEADER, flush=True)
    try:
        results = run_library(args.library, json.loads(args.settings), ops,
                              lambda r: print(format_row(r), flush=True))  # fmt: skip
    except AnpredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    counts = {status: sum(r.status is status for r in results) for status in CaseStatus}
    print(", ".join(f"{n} {status.value}" for status, n in counts.items()))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "library": args.library,
            "settings": json.loads(args.settings),
            "tolerance_factor": TOLERANCE_FACTOR,
            "noise_floor": NOISE_FLOOR,
            "results": [r.to_json() for r in results],
        }, indent=1))  # fmt: skip
    bad = counts[CaseStatus.FAILED] + counts[CaseStatus.ERROR]
    if not args.allow_missing:
        bad += counts[CaseStatus.MISSING]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
