"""OpenVINO: compiles the anchored ONNX graph for the CPU plugin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import openvino as ov

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.backends.registry import register_runner
from anpred.interchange.isolation import fed_name, isolation_model
from anpred.interchange.resume import ResumedGraphs


@register_runner("openvino")
class OpenVinoRunner(Runner):
    """OpenVINO CPU plugin; settings: ``threads``, ``precision`` (f32 default, bf16/f16).

    The precision hint is always set explicitly: on CPUs with bf16 support OpenVINO would
    otherwise pick bf16 by itself.
    """

    library = "openvino"
    #: The compiled anchored model (set at activation).
    compiled: Any | None = None

    def _compile(self, model: Any) -> Any:
        config = {
            "INFERENCE_PRECISION_HINT": self.settings.get("precision", "f32"),
            "INFERENCE_NUM_THREADS": self.threads,
            "PERFORMANCE_HINT": "LATENCY",
        }
        return self.core.compile_model(model, "CPU", config)

    def activate_impl(self, job: ModelJob) -> None:
        self.core = ov.Core()
        self.names = [a.onnx_name for a in job.export.anchors]
        self._isolation: tuple[Any, list[str]] | None = None
        self._resumed = ResumedGraphs(
            job.export,
            lambda m, _i, _o: self._compile(self.core.read_model(m.SerializeToString(), b"")),
        )
        self._plain: Any | None = None
        if self.resuming:  # compiled if the worker runs the whole model after all
            return
        model = self.core.read_model(str(job.export.anchored_path))
        self.step = Step.COMPILE
        self.compiled = self._compile(model)
        self._plain = self._compile(self.core.read_model(str(job.export.plain_path)))

    def _anchored(self) -> Any:
        if self.compiled is None:
            self.compiled = self._compile(self.core.read_model(str(self.job.export.anchored_path)))
        return self.compiled

    @property
    def plain(self) -> Any:
        """The compiled plain model."""
        if self._plain is None:
            self._plain = self._compile(self.core.read_model(str(self.job.export.plain_path)))
        return self._plain

    def _run(self, compiled: Any, feeds: Mapping[str, np.ndarray]) -> Capture:
        # share_outputs=False (the default): each value is a copy the request no longer
        # writes into, so it is taken as is, once per port, whatever names the port has
        # (copying it again for each name: yolov8n's anchored call 77.7 ms against 75.4,
        # benchmarks/bench_capture.py; the rest of its 1.23x over the plain model is the
        # plugin's own work to expose the anchors)
        result = compiled(dict(feeds), share_outputs=False)
        by_name = {}
        for port, value in result.items():
            array = np.asarray(value)
            for name in port.get_names():
                by_name[name] = array
        return Capture({a.key: by_name[a.onnx_name] for a in self.job.export.anchors})

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return self._run(self._anchored(), {self.job.export.input_name: feed})

    def resume_impl(
        self, feed: np.ndarray, fed: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> Capture:
        compiled, inputs = self._resumed.get(list(fed), outputs)
        result = compiled(self._resumed.feeds(inputs, feed, fed), share_outputs=False)
        by_name = {name: np.asarray(v) for port, v in result.items() for name in port.get_names()}
        names = self._resumed.names(outputs)
        return Capture({k: by_name[n] for k, n in zip(outputs, names, strict=True)})

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        result = self.plain({self.job.export.input_name: feed})
        return np.array(next(iter(result.values())))

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        if self._isolation is None:
            anchored = onnx.load(str(self.job.export.anchored_path))
            model, consumed = isolation_model(anchored, self.names)
            ov_model = self.core.read_model(model.SerializeToString(), b"")
            self._isolation = (self._compile(ov_model), consumed)
        compiled, consumed = self._isolation
        by_name = {a.onnx_name: a.key for a in self.job.export.anchors}
        feeds = {self.job.export.input_name: feed}
        feeds.update({fed_name(n): anchors[by_name[n]] for n in consumed})
        return self._run(compiled, feeds)

    def version(self) -> str:
        return ov.get_version()

    def describe_settings(self) -> dict[str, Any]:
        requested = self.settings.get("precision", "f32")
        settings: dict[str, Any] = {
            "threads": self.threads,
            "precision_requested": requested,
            "precision": requested,
        }
        resumed = self._resumed.programs() if hasattr(self, "_resumed") else []
        compiled = self.compiled if self.compiled is not None else next(iter(resumed), None)
        if compiled is not None:  # what the plugin really uses (it may fall back to f32)
            in_effect = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
            settings.update(
                precision=in_effect,
                fell_back=in_effect != requested,
                optimization_capabilities=list(
                    self.core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
                ),
            )
        return settings
