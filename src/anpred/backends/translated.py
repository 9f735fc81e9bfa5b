"""Execution of the anchored ONNX graph through anpred's translators for one library."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from anpred.backends.base import Capture, ModelJob, NodeHooks
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.interchange.resume import ResumedGraphs
from anpred.translate.evaluator_reference import EvaluatorGraph
from anpred.translate.graph import GraphProgram


class TranslatedProgram:
    """The anchored, plain and (lazily) isolation graphs of a job, translated to a library.

    Args:
        library: Translator package name under ``anpred.translate``.
        job: The model job.
        settings: Adapter settings (dtype, layout, jit, threads, ...).
        hooks: Optional per-node hooks applied to every graph, inside the library's
            traced/compiled function.
        graph: What executes each graph: the translators' interpreter, or ONNX's
            evaluator for the float64 reference that falls back to it
            (:class:`~anpred.translate.evaluator_reference.EvaluatorGraph`).
        lazy: Build the anchored and plain programs on first use (a worker that resumes
            may never run them).
    """

    def __init__(
        self,
        library: str,
        job: ModelJob,
        settings: Mapping[str, Any],
        hooks: NodeHooks | None = None,
        graph: type[GraphProgram] | type[EvaluatorGraph] = GraphProgram,
        lazy: bool = False,
    ) -> None:
        package = importlib.import_module(f"anpred.translate.{library}")
        self.adapter = package.make_adapter(dict(settings))
        self.job = job
        self.library = library
        self._graph = graph
        self.names = [a.onnx_name for a in job.export.anchors]
        self.hooks = hooks or NodeHooks()
        self._anchored: GraphProgram | EvaluatorGraph | None = None
        self._plain: GraphProgram | EvaluatorGraph | None = None
        if not lazy:
            self._anchored = self.anchored
            self._plain = self.plain
        self._isolation: tuple[GraphProgram | EvaluatorGraph, list[str]] | None = None
        self._resumed = ResumedGraphs(
            job.export, lambda m, inputs, names: self._program(m, outputs=names, feeds=inputs)
        )

    @property
    def anchored(self) -> GraphProgram | EvaluatorGraph:
        """The anchored graph's program (built on first use when ``lazy``)."""
        if self._anchored is None:
            model = onnx.load(self.job.export.anchored_path)
            self._anchored = self._program(model, outputs=self.names)
        return self._anchored

    @property
    def plain(self) -> GraphProgram | EvaluatorGraph:
        """The plain graph's program (built on first use when ``lazy``)."""
        if self._plain is None:
            self._plain = self._program(onnx.load(self.job.export.plain_path))
        return self._plain

    def _program(self, model: onnx.ModelProto, **kwargs: Any) -> GraphProgram | EvaluatorGraph:
        return self._graph(
            model, self.adapter, hook=self.hooks.post, pre_hook=self.hooks.pre, **kwargs
        )

    def _capture(
        self,
        values: Mapping[str, Any],
        program: GraphProgram | EvaluatorGraph,
        keys: Sequence[str] | None = None,
    ) -> Capture:
        capture = Capture({})
        for anchor in self.job.export.anchors:
            if keys is not None and anchor.key not in keys:
                continue
            value = values[anchor.onnx_name]
            array = np.asarray(self.adapter.to_numpy(value))
            # ONNX's output dtype (jax without x64 holds int64 anchors as int32)
            dtype = program.output_dtypes.get(anchor.onnx_name)
            capture.arrays[anchor.key] = self.adapter.restore_dtype(array, dtype)
            layout = self.adapter.layout(value)
            if layout != "NCHW":  # NCHW = the graph's own layout: nothing to undo
                capture.layouts[anchor.key] = layout
        return capture

    def infer(self, feed: np.ndarray) -> Capture:
        """Anchored inference."""
        return self._capture(self.anchored.run({self.job.export.input_name: feed}), self.anchored)

    def infer_plain(self, feed: np.ndarray) -> np.ndarray:
        """Plain inference, final output in NCHW-free form (outputs are not 4-D images)."""
        ((name, value),) = self.plain.run({self.job.export.input_name: feed}).items()
        array = np.asarray(self.adapter.to_numpy(value))
        return self.adapter.restore_dtype(array, self.plain.output_dtypes.get(name))

    def isolate(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        """Stage-isolated inference (see :mod:`anpred.interchange.isolation`)."""
        export = self.job.export
        if self._isolation is None:
            model, consumed = isolation_model(onnx.load(export.anchored_path), self.names)
            feeds = [export.input_name, *(fed_name(n) for n in consumed)]
            program = self._program(model, outputs=self.names, feeds=feeds)
            self._isolation = (program, consumed)
        program, consumed = self._isolation
        by_name = {a.onnx_name: a.key for a in export.anchors}
        feeds_np = {export.input_name: feed}
        feeds_np.update({fed_name(n): anchors[by_name[n]] for n in consumed})
        return self._capture(program.run(feeds_np), program)

    def resume(
        self, feed: np.ndarray, fed: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> Capture:
        """Resumed inference (see :meth:`anpred.backends.base.Runner.resume`)."""
        program, inputs = self._resumed.get(list(fed), outputs)
        values = program.run(self._resumed.feeds(inputs, feed, fed))
        return self._capture(values, program, outputs)
