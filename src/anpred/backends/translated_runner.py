"""tensorflow, jax and paddle: the anchored ONNX graph through anpred's translators.

:class:`TranslatedRunner` is abstract; each library's runner is a final class that names
its library (torch's, for ONNX files, is in :mod:`anpred.backends.torch_runner`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, final

import numpy as np

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.backends.registry import register_runner
from anpred.backends.translated import TranslatedProgram
from anpred.errors import MissingTranslatorError
from anpred.library import get_library
from anpred.translate.evaluator_reference import EvaluatorGraph


class TranslatedRunner(Runner):
    """Abstract: a runner whose model is the anchored ONNX graph translated to
    :attr:`library`, executed node by node (so it applies :class:`NodeHooks`).
    """

    node_hooks = True
    #: The translated program (set at activation).
    program: TranslatedProgram | None = None

    @property
    @abstractmethod
    def library(self) -> str:
        """The library, also the translator package under ``anpred.translate``."""

    def adapter_settings(self) -> dict[str, Any]:
        """The settings the library's adapter gets (default: the participant's)."""
        return dict(self.settings)

    def falls_back_to_evaluator(self) -> bool:
        """Whether a graph op without a translator makes this runner use ONNX's evaluator.

        Only the float64 reference of a user's ONNX file (torch in float64) does, so that
        a missing torch translator never blocks a run; for every other participant the
        missing op is its error (:mod:`anpred.translate.evaluator_reference`).
        """
        return self.library == "torch" and self.settings.get("dtype") == "float64"

    def activate_impl(self, job: ModelJob) -> None:
        self.step = Step.TRANSLATE
        try:
            self.program = TranslatedProgram(
                self.library, job, self.adapter_settings(), self.hooks, lazy=self.resuming
            )
        except MissingTranslatorError as exc:
            if not self.falls_back_to_evaluator():
                raise
            settings = {"reason": str(exc)}
            self.program = TranslatedProgram(
                "evaluator_reference",
                job,
                settings,
                self.hooks,
                graph=EvaluatorGraph,
                lazy=self.resuming,
            )
        self.step = Step.COMPILE

    @property
    def activated(self) -> TranslatedProgram:
        """The program of the activated job."""
        if self.program is None:
            raise RuntimeError("runner is not activated")
        return self.program

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return self.activated.infer(feed)

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return self.activated.infer_plain(feed)

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        return self.activated.isolate(feed, anchors)

    def resume_impl(
        self, feed: np.ndarray, fed: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> Capture:
        return self.activated.resume(feed, fed, outputs)

    def version(self) -> str:
        return get_library(self.library).version() or "?"  # distributions: its descriptor

    def describe_settings(self) -> dict[str, Any]:
        settings = dict(self.settings)
        if self.program is not None:
            settings.update(self.program.adapter.settings())
        return settings


@register_runner("tensorflow")
@final
class TensorFlowRunner(TranslatedRunner):
    """TensorFlow via ``anpred.translate.tensorflow`` (NHWC by default)."""

    library = "tensorflow"


@register_runner("jax")
@final
class JaxRunner(TranslatedRunner):
    """JAX via ``anpred.translate.jax`` (``jax.jit`` by default)."""

    library = "jax"


@register_runner("paddle")
@final
class PaddleRunner(TranslatedRunner):
    """PaddlePaddle via ``anpred.translate.paddle`` (dynamic graph)."""

    library = "paddle"
