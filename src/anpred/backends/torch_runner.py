"""PyTorch: the native eager module with anchors captured by forward hooks.

For a user's ONNX file (no native module) torch runs the graph through anpred's torch
translators instead. ``settings={"dtype": "float64"}`` gives the fp64 reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.backends.registry import register_runner
from anpred.backends.translated import TranslatedProgram
from anpred.interchange.anchored import AnchorRecorder
from anpred.zoo.spec import Anchor


@register_runner("torch")
class TorchRunner(Runner):
    """Native torch eager execution; settings: ``dtype`` (float32/float64), ``threads``."""

    library = "torch"

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype."""
        return torch.float64 if self.settings.get("dtype") == "float64" else torch.float32

    def activate_impl(self, job: ModelJob) -> None:
        torch.set_num_threads(int(self.settings.get("threads", 1)))
        self.program: TranslatedProgram | None = None
        if job.zoo_model is None:
            self.step = Step.TRANSLATE
            self.program = TranslatedProgram("torch", job, self.settings)
            return
        from anpred.zoo.weights import load_model

        model, _ = load_model(job.zoo_model, job.weights, job.seed)
        self.model = model.to(self.dtype).eval()
        anchors = {}
        for record in job.export.anchors:
            if record.module:
                anchors[record.anchor] = Anchor(record.anchor, record.module, record.group)
        self.anchors = list(anchors.values())

    def _feed(self, feed: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(feed)).to(self.dtype)

    def _arrays(self, captured: Mapping[str, torch.Tensor]) -> Capture:
        keys = [a.key for a in self.job.export.anchors]
        missing = [k for k in keys if k not in captured]
        if missing:
            raise RuntimeError(f"anchors not captured: {missing}")
        return Capture({k: captured[k].detach().cpu().numpy() for k in keys})

    def infer_impl(self, feed: np.ndarray) -> Capture:
        if self.program is not None:
            return self.program.infer(feed)
        recorder = AnchorRecorder(self.model, self.anchors)
        try:
            with torch.no_grad():
                output = self.model(self._feed(feed))
            return self._arrays(recorder.captured(output))
        finally:
            recorder.remove()

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        if self.program is not None:
            return self.program.infer_plain(feed)
        from anpred.interchange.anchored import final_output

        with torch.no_grad():
            return final_output(self.model(self._feed(feed))).cpu().numpy()

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        if self.program is not None:
            return self.program.isolate(feed, anchors)
        modules = dict(self.model.named_modules())
        captured: dict[str, torch.Tensor] = {}
        handles = []

        def replace(name: str) -> Any:
            def hook(_module: Any, _inputs: Any, output: Any) -> Any:
                if not isinstance(output, torch.Tensor) or name not in anchors:
                    return None
                captured[name] = output.detach().clone()
                return torch.from_numpy(np.ascontiguousarray(anchors[name])).to(self.dtype)

            return hook

        for anchor in self.anchors:
            handles.append(modules[anchor.module].register_forward_hook(replace(anchor.name)))
        recorder = AnchorRecorder(self.model, [a for a in self.anchors])
        try:
            with torch.no_grad():
                output = self.model(self._feed(feed))
            result = recorder.captured(output)
        finally:
            for handle in handles:
                handle.remove()
            recorder.remove()
        result.update(captured)
        return self._arrays(result)

    def version(self) -> str:
        return torch.__version__

    def describe_settings(self) -> dict[str, Any]:
        return {"dtype": str(self.dtype).replace("torch.", ""),
                "threads": torch.get_num_threads(),
                "execution": "eager (native module)" if self.program is None
                else "anpred torch translators"}
