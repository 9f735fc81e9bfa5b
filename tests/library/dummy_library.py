"""A library added to anpred from outside, through its descriptor alone.

The worked example of ``docs/adding-a-library.md``: one module, one registration. ONNX's
reference evaluator (numpy) runs the anchored ONNX file. Loaded by setting
``ANPRED_PLUGINS=dummy_library`` with this folder on ``PYTHONPATH``: the main process
imports this module to register the library, each ``dummy`` worker imports it again to
find :class:`DummyRunner`.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

import numpy as np

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.library import Library, Loads, register_library

register_library(
    Library(
        name="dummy",
        distributions=("onnx",),
        extra="",  # not an anpred extra: the install hint names the requirement
        requirement="onnx",
        import_name="onnx",
        runner="dummy_library:DummyRunner",
        loads=Loads.ONNX_FILE,
        configurations={"": {}},
        in_all=False,  # runs only when named: `--libs torch,onnxruntime,dummy`
    )
)


class DummyRunner(Runner):
    """The anchored ONNX graph in ``onnx.reference.ReferenceEvaluator``."""

    library = "dummy"

    def activate_impl(self, job: ModelJob) -> None:
        import onnx
        from onnx.reference import ReferenceEvaluator

        self.step = Step.COMPILE
        self.names = [a.onnx_name for a in job.export.anchors]
        self.anchored = ReferenceEvaluator(str(job.export.anchored_path))
        self.plain = ReferenceEvaluator(str(job.export.plain_path))
        # Stage isolation: every consumer of an anchor reads a `<anchor>.fed` input instead.
        model, self.consumed = isolation_model(onnx.load(job.export.anchored_path), self.names)
        self.isolating = ReferenceEvaluator(model)

    def _capture(self, values: list[Any]) -> Capture:
        anchors = self.job.export.anchors
        return Capture({a.key: np.asarray(v) for a, v in zip(anchors, values, strict=True)})

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return self._capture(self.anchored.run(self.names, {self.job.export.input_name: feed}))

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return np.asarray(self.plain.run(None, {self.job.export.input_name: feed})[0])

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        key = {a.onnx_name: a.key for a in self.job.export.anchors}
        feeds = {self.job.export.input_name: feed}
        feeds.update({fed_name(name): anchors[key[name]] for name in self.consumed})
        return self._capture(self.isolating.run(self.names, feeds))

    def version(self) -> str:
        return importlib.metadata.version("onnx")
