"""onnxruntime: executes the anchored ONNX graph directly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.backends.registry import register_runner
from anpred.interchange.ir_version import lowered_ir
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.interchange.resume import ResumedGraphs

#: ``settings["optimization"]`` values and the onnxruntime levels they select.
OPT_LEVELS = {
    "O0": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "O1": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "O2": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "O3": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@register_runner("onnxruntime")
class OnnxRuntimeRunner(Runner):
    """onnxruntime CPUExecutionProvider; settings: ``threads``, ``optimization`` (O0..O3)."""

    library = "onnxruntime"

    def _session(self, model: str | bytes) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = OPT_LEVELS[self.settings.get("optimization", "O3")]
        options.log_severity_level = 3
        try:
            return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as err:  # an older release refuses the IR version of today's onnx
            lowered = lowered_ir(model, str(err))
            if lowered is None:
                raise
            return ort.InferenceSession(lowered, options, providers=["CPUExecutionProvider"])

    def activate_impl(self, job: ModelJob) -> None:
        self.step = Step.COMPILE
        self._sessions: dict[str, ort.InferenceSession] = {}
        if not self.resuming:  # else built if the worker runs the whole model after all
            self._whole("anchored")
            self._whole("plain")
        self.names = [a.onnx_name for a in job.export.anchors]
        self._isolation: tuple[ort.InferenceSession, list[str]] | None = None
        self._resumed = ResumedGraphs(
            job.export, lambda m, _i, _o: self._session(m.SerializeToString())
        )

    def _whole(self, kind: str) -> ort.InferenceSession:
        """The session of the export's ``anchored`` or ``plain`` model."""
        if kind not in self._sessions:
            export = self.job.export
            path = export.anchored_path if kind == "anchored" else export.plain_path
            self._sessions[kind] = self._session(str(path))
        return self._sessions[kind]

    def infer_impl(self, feed: np.ndarray) -> Capture:
        values = self._whole("anchored").run(self.names, {self.job.export.input_name: feed})
        return Capture({a.key: v for a, v in zip(self.job.export.anchors, values, strict=True)})

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return self._whole("plain").run(None, {self.job.export.input_name: feed})[0]

    def resume_impl(
        self, feed: np.ndarray, fed: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> Capture:
        session, inputs = self._resumed.get(list(fed), outputs)
        values = session.run(self._resumed.names(outputs), self._resumed.feeds(inputs, feed, fed))
        return Capture(dict(zip(outputs, values, strict=True)))

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        if self._isolation is None:
            anchored = onnx.load(str(self.job.export.anchored_path))
            model, consumed = isolation_model(anchored, self.names)
            self._isolation = (self._session(model.SerializeToString()), consumed)
        session, consumed = self._isolation
        by_name = {a.onnx_name: a.key for a in self.job.export.anchors}
        feeds: dict[str, Any] = {self.job.export.input_name: feed}
        feeds.update({fed_name(n): anchors[by_name[n]] for n in consumed})
        values = session.run(self.names, feeds)
        return Capture({a.key: v for a, v in zip(self.job.export.anchors, values, strict=True)})

    def version(self) -> str:
        return ort.__version__

    def describe_settings(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "optimization": self.settings.get("optimization", "O3"),
            "provider": "CPUExecutionProvider",
        }
