"""tensorflow, jax and paddle: the anchored ONNX graph through anpred's translators."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

import numpy as np

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.backends.registry import register_runner
from anpred.backends.translated import TranslatedProgram
from anpred.inject.spec import SETTINGS_KEY

#: Distribution name of each library, for its version.
DISTRIBUTIONS = {
    "tensorflow": "tensorflow-cpu",
    "jax": "jax",
    "paddle": "paddlepaddle",
    "torch": "torch",
}


class TranslatedRunner(Runner):
    """A runner whose model is the anchored ONNX graph translated to ``library``."""

    def activate_impl(self, job: ModelJob) -> None:
        self.step = Step.TRANSLATE
        self.program = TranslatedProgram(
            self.library, job, self.settings, hook=self.settings.get("_hook")
        )
        self.step = Step.COMPILE

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return self.program.infer(feed)

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return self.program.infer_plain(feed)

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        return self.program.isolate(feed, anchors)

    def version(self) -> str:
        return importlib.metadata.version(DISTRIBUTIONS[self.library])

    def describe_settings(self) -> dict[str, Any]:
        settings = {k: v for k, v in self.settings.items() if not k.startswith("_")}
        if hasattr(self, "program"):
            settings.update(self.program.adapter.settings())
            if self.program.fault is not None:  # the ground truth: spec and nodes hit
                settings[SETTINGS_KEY] = self.program.fault.record()
        return settings


@register_runner("tensorflow")
class TensorFlowRunner(TranslatedRunner):
    """TensorFlow via ``anpred.translate.tensorflow`` (NHWC by default)."""

    library = "tensorflow"


@register_runner("jax")
class JaxRunner(TranslatedRunner):
    """JAX via ``anpred.translate.jax`` (``jax.jit`` by default)."""

    library = "jax"


@register_runner("paddle")
class PaddleRunner(TranslatedRunner):
    """PaddlePaddle via ``anpred.translate.paddle`` (dynamic graph)."""

    library = "paddle"
