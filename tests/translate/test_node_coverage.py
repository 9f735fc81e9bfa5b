"""The node-test counts ``anpred libs`` shows are the expectation files' (their single source)."""

from __future__ import annotations

import json
from pathlib import Path

from anpred.translate.node_coverage import NODE_TESTS, RUNNABLE, describe

EXPECTATIONS = Path(__file__).parent / "expectations"


def _passed(library: str, mode: str) -> tuple[int, int]:
    name = f"{library}.json" if mode == "static" else f"{library}.{mode}.json"
    tests = json.loads((EXPECTATIONS / name).read_text())["tests"]
    return sum(t["outcome"] == "pass" for t in tests.values()), len(tests)


def test_counts_are_the_expectation_files() -> None:
    found = {}
    for library in NODE_TESTS:
        found[library] = {}
        for mode in ("static", "fed"):
            passed, total = _passed(library, mode)
            assert total == RUNNABLE, (library, mode, total)
            found[library][mode] = passed
    assert found == NODE_TESTS, f"put these counts in anpred/translate/node_coverage.py: {found}"


def test_every_library_with_expectations_has_counts() -> None:
    libraries = {p.name.split(".")[0] for p in EXPECTATIONS.glob("*.json")}
    assert libraries == set(NODE_TESTS)


def test_description() -> None:
    assert describe("onnxruntime") == f"{NODE_TESTS['onnxruntime']['static']}/{RUNNABLE}"
    assert describe("torch").endswith(f"(fed {NODE_TESTS['torch']['fed']})")
    assert describe("openvino") == "-"
