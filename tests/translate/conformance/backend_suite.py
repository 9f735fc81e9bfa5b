"""ONNX's backend node tests run through one library's translators, against expectations.

Each runnable test (:mod:`conformance.backend_tests`) is built into a
:class:`~anpred.translate.graph.GraphProgram` through the library's adapter, exactly as a
run builds a model, and its outputs are compared with ONNX's expected outputs the way
ONNX's backend runner does: same shape, same dtype (results keep ONNX's output dtypes),
``numpy.testing.assert_allclose`` at the test's tolerance (rtol 1e-3, atol 1e-7 by default).
``onnxruntime`` runs the same tests on the unmodified model (the reference implementation).

Outcomes: ``pass``, ``missing`` (no translator), ``error`` (the library raised), ``wrong``
(shape, dtype or values differ). The expectation file of a library
(``tests/translate/expectations/<library>.json``) holds every test's outcome and, for each
one that does not pass, a reason (:mod:`conformance.backend_reasons`).

Command line::

    python -m conformance.backend_suite --library jax [--subset all] [--update]
        [--mode static|fed] [--expectations DIR] [--json out.json]

prints the outcome table, then the tests whose outcome differs from the expectation file,
and exits 1 when one does (``--update`` rewrites the file instead). Each library must run in
its own process (tensorflow and paddle never share one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conformance.backend_tests import BackendTest, fed_feeds, load_tests, select, static_model

LIBRARIES = ("torch", "tensorflow", "jax", "paddle", "onnxruntime")
OUTCOMES = ("pass", "missing", "error", "wrong")
#: Where the checked-in expectation files live (relative to the repository root).
DEFAULT_EXPECTATIONS = Path(__file__).resolve().parents[1] / "expectations"


def _first_line(exc: BaseException) -> str:
    line = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {line}"


def compare(test: BackendTest, actual: Sequence[np.ndarray]) -> tuple[str, str]:
    """Judge outputs against ``test``'s expected outputs; return (outcome, message)."""
    for index, (out, ref) in enumerate(zip(actual, test.outputs, strict=True)):
        if out.shape != ref.shape:
            return "wrong", f"output {index}: shape {out.shape} != {ref.shape}"
        if out.dtype != ref.dtype:
            return "wrong", f"output {index}: dtype {out.dtype} != {ref.dtype}"
        try:
            np.testing.assert_allclose(out, ref, rtol=test.rtol, atol=test.atol)
        except AssertionError as exc:
            detail = " ".join(line.strip() for line in str(exc).splitlines()[3:5])
            return "wrong", f"output {index}: {detail}"[:200]
    return "pass", ""


class Runner:
    """Runs backend tests through one library (in this process).

    Args:
        library: One of :data:`LIBRARIES`.
        mode: ``"static"`` (inputs after the first are constants) or ``"fed"``.
    """

    def __init__(self, library: str, mode: str = "static") -> None:
        self.library = library
        self.mode = mode
        self.adapter: Any = None
        if library != "onnxruntime":
            from conformance.suite import make_library_adapter

            self.adapter = make_library_adapter(library)

    def _translated(self, test: BackendTest) -> list[np.ndarray]:
        from anpred.translate.graph import GraphProgram
        from conformance.suite import _to_onnx_layout

        if self.mode == "static":
            model, feeds = static_model(test)
        else:
            model, feeds = test.model, fed_feeds(test)
        program = GraphProgram(model, self.adapter)
        values = program.run(feeds)
        return [
            self.adapter.restore_dtype(_to_onnx_layout(self.adapter, values[name]),
                                       program.output_dtypes[name])
            for name in program.outputs
        ]  # fmt: skip

    def _onnxruntime(self, test: BackendTest) -> list[np.ndarray]:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = onnxruntime.InferenceSession(
                test.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            if "NOT_IMPLEMENTED" in str(exc) or "Could not find an implementation" in str(exc):
                raise _NoKernel(_first_line(exc)) from exc
            raise
        return [np.asarray(v) for v in session.run(None, fed_feeds(test))]

    def run(self, test: BackendTest) -> tuple[str, str]:
        """Run one test; return (outcome, message)."""
        from anpred.errors import MissingTranslatorError

        try:
            if self.library == "onnxruntime":
                actual = self._onnxruntime(test)
            else:
                actual = self._translated(test)
        except (MissingTranslatorError, _NoKernel) as exc:
            return "missing", str(exc)[:200]
        except Exception as exc:  # noqa: BLE001 - any library failure is the test's outcome
            return "error", _first_line(exc)
        return compare(test, actual)


class _NoKernel(Exception):
    """onnxruntime has no kernel for the op (its "no translator")."""


def run_library(
    library: str, subset: str = "vision", mode: str = "static", verbose: bool = False
) -> dict[str, dict[str, Any]]:
    """Run the backend tests of ``subset`` through ``library``; return records by name."""
    tests = select(load_tests(), subset)
    runner = Runner(library, mode)
    records = {}
    for test in tests:
        outcome, message = runner.run(test)
        records[test.name] = {"outcome": outcome, "message": message, "vision": test.vision}
        if verbose:
            print(f"{test.name:<60} {outcome:<7} {message}", flush=True)
    return records


def count_table(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Outcome counts for the vision subset and for all runnable tests in ``records``."""
    table = {}
    for subset in ("vision", "all"):
        chosen = [r for r in records.values() if subset == "all" or r["vision"]]
        counts = Counter(r["outcome"] for r in chosen)
        table[subset] = {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}
        table[subset]["total"] = len(chosen)
    return table


def format_table(library: str, records: Mapping[str, Mapping[str, Any]]) -> str:
    """The outcome table of one library (vision subset and all runnable)."""
    table = count_table(records)
    lines = [f"{library:<12} {'vision':>7} {'all':>7}"]
    for key in (*OUTCOMES, "total"):
        lines.append(f"{key:<12} {table['vision'][key]:>7} {table['all'][key]:>7}")
    return "\n".join(lines)


def expectation_path(directory: Path, library: str, mode: str) -> Path:
    """Path of a library's expectation file (``<library>.json``; ``<library>.fed.json``)."""
    return directory / (f"{library}.json" if mode == "static" else f"{library}.{mode}.json")


def differences(
    records: Mapping[str, Mapping[str, Any]], expected: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """Tests whose outcome differs from the expectation (or that one side lacks)."""
    lines = []
    for name in sorted(set(records) | set(expected)):
        got = records.get(name, {}).get("outcome", "absent")
        want = expected.get(name, {}).get("outcome", "absent")
        if got != want:
            message = records.get(name, {}).get("message", "")
            lines.append(f"{name}: expected {want}, got {got} {message}".rstrip())
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    from conformance.backend_reasons import annotate

    parser = argparse.ArgumentParser(prog="python -m conformance.backend_suite")
    parser.add_argument("--library", required=True, choices=LIBRARIES)
    parser.add_argument("--subset", choices=("vision", "all"), default="all")
    parser.add_argument("--mode", choices=("static", "fed"), default="static")
    parser.add_argument("--expectations", type=Path, default=DEFAULT_EXPECTATIONS)
    parser.add_argument("--update", action="store_true", help="rewrite the expectation file")
    parser.add_argument("--json", type=Path, help="also write the records to this file")
    parser.add_argument("--verbose", action="store_true", help="print every test")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    records = run_library(args.library, args.subset, args.mode, args.verbose)
    elapsed = time.perf_counter() - start
    print(format_table(args.library, records))
    print(f"{len(records)} tests in {elapsed:.1f} s ({args.mode} inputs)")
    if args.json is not None:
        args.json.write_text(json.dumps(records, indent=1, sort_keys=True))
    path = expectation_path(args.expectations, args.library, args.mode)
    if args.update:
        reference = expectation_path(args.expectations, "onnxruntime", "static")
        ort = json.loads(reference.read_text())["tests"] if reference.exists() else {}
        static = None
        if args.mode != "static":  # a fed-mode failure that passes static needs the constant
            own = expectation_path(args.expectations, args.library, "static")
            static = json.loads(own.read_text())["tests"] if own.exists() else {}
        annotated = annotate(args.library, records, ort, static)
        path.parent.mkdir(parents=True, exist_ok=True)
        content = {"library": args.library, "mode": args.mode, "tests": annotated}
        path.write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")
        return 0
    if not path.exists():
        print(f"no expectation file {path}; run with --update", file=sys.stderr)
        return 2
    expected = json.loads(path.read_text())["tests"]
    if args.subset == "vision":
        expected = {k: v for k, v in expected.items() if v.get("vision")}
    changed = differences(records, expected)
    for line in changed:
        print(line)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
