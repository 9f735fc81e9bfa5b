"""The runner seam: every hook the worker calls is declared on ``Runner`` with its default,
so that the worker calls it on any runner instead of probing for it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import numpy as np

import anpred.execution.worker as worker_module
from anpred.backends.base import Capture, ModelJob, Runner, Step


class _Plain(Runner):
    """A runner that declares nothing beyond the abstract methods."""

    library = "plain"

    def activate_impl(self, job: ModelJob) -> None:
        """Nothing to load."""

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return Capture({"output": feed})

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return feed

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        return Capture(dict(anchors))

    def version(self) -> str:
        return "0"


def test_a_runner_that_declares_nothing_has_every_hook_with_its_default() -> None:
    runner = _Plain({})
    assert runner.wants_reference is False
    assert runner.conversion_record() is None
    assert runner.on_step is None and runner.reference is None
    steps: list[Step] = []
    runner.on_step = steps.append  # the worker sets it on every runner
    assert runner.on_step is not None


def test_the_worker_does_not_probe_its_runner() -> None:
    tree = ast.parse(Path(worker_module.__file__).read_text())
    probes = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr")
    ]
    assert probes == [], f"hasattr/getattr in execution/worker.py at lines {probes}"
