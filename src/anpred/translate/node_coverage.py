"""How many of ONNX's backend node tests each library passes (what ``anpred libs`` shows).

The expectation files (``tests/translate/expectations/<library>[.fed].json``, written by
``cd tests/translate && python -m conformance.backend_suite --library <lib> --update``) are
the single source of truth; :data:`NODE_TESTS` is their pass counts, carried in the package
so that ``anpred libs`` can say them without the test tree, and
``tests/translate/test_node_coverage.py`` fails when the two disagree (it prints the counts
to put here).

``static``: every input but the first is an initializer (constant), as in anpred's graphs;
``fed``: every input fed at run time (shape ops on fed tensors, dynamic shapes).
"""

from __future__ import annotations

#: Runnable node tests (float32 in or out, onnx 1.23.2): the denominator of every count.
RUNNABLE = 1155
#: Library → mode → node tests passed (tests/translate/expectations/).
NODE_TESTS: dict[str, dict[str, int]] = {
    "onnxruntime": {"static": 1101, "fed": 1101},
    "torch": {"static": 1108, "fed": 1069},
    "tensorflow": {"static": 1115, "fed": 1071},
    "jax": {"static": 1088, "fed": 870},
    "paddle": {"static": 1130, "fed": 1129},
}


def describe(library: str) -> str:
    """``1101/1155`` (``static``; ``, fed 1062`` when it differs), or ``-`` for a library the
    node tests do not run (openvino runs ONNX files itself; deployment runtimes).
    """
    counts = NODE_TESTS.get(library)
    if counts is None:
        return "-"
    text = f"{counts['static']}/{RUNNABLE}"
    return text if counts["fed"] == counts["static"] else f"{text} (fed {counts['fed']})"
