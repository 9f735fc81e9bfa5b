"""Execution of the anchored ONNX graph through anpred's translators for one library."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from anpred.backends.base import Capture, ModelJob
from anpred.inject.plan import PlannedFault, plan_fault
from anpred.inject.spec import Target, fault_kind, settings_without_fault
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.translate.graph import GraphProgram, NodeHook
from anpred.translate.registry import NodeCall


class TranslatedProgram:
    """The anchored, plain and (lazily) isolation graphs of a job, translated to a library.

    A fault in ``settings["fault"]`` (see :mod:`anpred.inject`) is applied to every graph:
    attribute faults by rewriting the ONNX graphs, the others through the interpreter's
    per-node hooks, inside the library's traced/compiled function.

    Args:
        library: Translator package name under ``anpred.translate``.
        job: The model job.
        settings: Adapter settings (dtype, layout, jit, threads, ...), optionally ``fault``.
        hook: Optional per-node hook applied to every graph (after the fault's hook).

    Attributes:
        fault: The planned fault, or ``None`` for a clean participant.
    """

    def __init__(
        self, library: str, job: ModelJob, settings: Mapping[str, Any], hook: NodeHook | None = None
    ) -> None:
        package = importlib.import_module(f"anpred.translate.{library}")
        self.adapter = package.make_adapter(settings_without_fault(settings))
        self.job = job
        self.library = library
        self.names = [a.onnx_name for a in job.export.anchors]
        anchored = onnx.load(job.export.anchored_path)
        self.fault: PlannedFault | None = plan_fault(settings, job.export, anchored)
        self.hook, self.pre_hook = hook, None
        if self.fault is not None and not self._rewrites_graph:
            self._hook_fault(library, self.fault, hook)
        self.anchored = GraphProgram(
            self._graph(anchored),
            self.adapter,
            outputs=self.names,
            hook=self.hook,
            pre_hook=self.pre_hook,
        )
        self.plain = GraphProgram(
            self._graph(onnx.load(job.export.plain_path)),
            self.adapter,
            hook=self.hook,
            pre_hook=self.pre_hook,
        )
        self._isolation: tuple[GraphProgram, list[str]] | None = None

    @property
    def _rewrites_graph(self) -> bool:
        return self.fault is not None and fault_kind(self.fault.spec.kind).target is (
            Target.ATTRIBUTE
        )

    def _graph(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """The graph to translate: ``model``, rewritten for an attribute fault."""
        if self.fault is None or not self._rewrites_graph:
            return model
        from anpred.inject.onnx_rewrite import rewrite_model

        return rewrite_model(model, self.fault.spec, self.fault.nodes, library=self.library)

    def _hook_fault(self, library: str, fault: PlannedFault, hook: NodeHook | None) -> None:
        from anpred.inject.hooks import FaultHooks
        from anpred.inject.math import library_math

        hooks = FaultHooks(fault.spec, fault.nodes, library_math(library))
        self.pre_hook = hooks.pre
        if hook is None:
            self.hook = hooks.post
            return

        def post(call: NodeCall, outputs: list[Any]) -> list[Any]:
            return hook(call, hooks.post(call, outputs))

        self.hook = post

    def _capture(self, values: Mapping[str, Any]) -> Capture:
        capture = Capture({})
        for anchor in self.job.export.anchors:
            value = values[anchor.onnx_name]
            capture.arrays[anchor.key] = np.asarray(self.adapter.to_numpy(value))
            layout = self.adapter.layout(value)
            if layout != "NCHW":  # NCHW = the graph's own layout: nothing to undo
                capture.layouts[anchor.key] = layout
        return capture

    def infer(self, feed: np.ndarray) -> Capture:
        """Anchored inference."""
        return self._capture(self.anchored.run({self.job.export.input_name: feed}))

    def infer_plain(self, feed: np.ndarray) -> np.ndarray:
        """Plain inference, final output in NCHW-free form (outputs are not 4-D images)."""
        (value,) = self.plain.run({self.job.export.input_name: feed}).values()
        return np.asarray(self.adapter.to_numpy(value))

    def isolate(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        """Stage-isolated inference (see :mod:`anpred.interchange.isolation`)."""
        export = self.job.export
        if self._isolation is None:
            anchored = self._graph(onnx.load(export.anchored_path))
            model, consumed = isolation_model(anchored, self.names)
            feeds = [export.input_name, *(fed_name(n) for n in consumed)]
            program = GraphProgram(
                model,
                self.adapter,
                outputs=self.names,
                feeds=feeds,
                hook=self.hook,
                pre_hook=self.pre_hook,
            )
            self._isolation = (program, consumed)
        program, consumed = self._isolation
        by_name = {a.onnx_name: a.key for a in export.anchors}
        feeds_np = {export.input_name: feed}
        feeds_np.update({fed_name(n): anchors[by_name[n]] for n in consumed})
        return self._capture(program.run(feeds_np))
