"""Runners of deployment runtimes: a real converter's artifact made from the anchored model.

SKELETON (interface fixed for the runtime runners; the framework owner fills in the
bodies marked TODO and may add helpers in sibling modules).

A :class:`ConvertedRunner` subclass implements four hooks and nothing else:

- :meth:`ConvertedRunner.converter_version` — the converter's version (cache key);
- :meth:`ConvertedRunner.convert_impl` — convert one ONNX model (a :class:`ConversionSource`)
  into an artifact inside a given folder; raise :class:`ConversionError` with the
  converter's one-line reason when it fails;
- :meth:`ConvertedRunner.load_impl` — load the artifact with the runtime, return a handle;
- :meth:`ConvertedRunner.run_impl` — run the handle on the feed(s) and return the raw
  outputs **in the artifact's output order**, as numpy arrays, untouched.

The base class does the rest, the same way for every runtime:

- conversion is a step (:attr:`Step.CONVERT`) with its own status: a failure becomes the
  participant's error ``conversion failed: <reason>``; it never fails the run;
- conversions are cached per (model bytes, runtime, configuration settings, converter
  version) under ``$ANPRED_CACHE/conversions`` (failures too, with their reason);
- raw outputs are mapped to anchors by a recorded rule (:mod:`anpred.backends.output_map`:
  order, then shape with the layout each output came back in — NCHW, NHWC, batch dropped —
  and values only where the shape cannot decide); the rule and layouts are written to the
  participant's folder of the run store;
- the plain model is converted too, for the observer-effect check at the output;
- stage isolation converts the isolation model (anchors fed as extra inputs) when the
  runtime can; when it cannot, the participant runs without isolation and says why.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.base import Capture, ModelJob, Runner


class ConversionError(Exception):
    """A converter failed; ``str(err)`` is its one-line reason."""


@dataclass(frozen=True)
class ConversionSource:
    """What a converter converts.

    Attributes:
        onnx_path: The ONNX file to convert (anchored, plain or isolation model), with
            static shapes; already simplified by onnxslim when ``slimmed`` (several
            converters need it: onnx2tf, TVM, x2paddle).
        input_names: Graph input names, in order (the model input first, then fed anchors
            for an isolation model).
        input_shapes: Static shape of each input.
        output_names: Graph output names, in order (for the anchored model: one per anchor,
            the final output included, in the export's anchor order).
        output_shapes: Static shape of each output (NCHW, as in the ONNX graph).
        kind: ``"anchored"``, ``"plain"`` or ``"isolation"``.
        zoo_model: Zoo name when the model came from anpred's zoo (converters that start
            from torch may rebuild it), else ``None``.
        settings: The participant's configuration settings.
    """

    onnx_path: Path
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    output_names: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    kind: str
    zoo_model: str | None
    settings: Mapping[str, Any]
    slimmed: bool = False


class ConvertedRunner(Runner):
    """A deployment runtime running a converted artifact (see the module docstring)."""

    #: Whether the converter needs the ONNX simplified by onnxslim first.
    needs_slim: bool = False

    @abstractmethod
    def converter_version(self) -> str:
        """The converter's version (part of the conversion cache key)."""

    @abstractmethod
    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        """Convert ``source`` into an artifact inside ``folder``; return its path.

        Raises:
            ConversionError: The converter failed (its one-line reason).
        """

    @abstractmethod
    def load_impl(self, artifact: Path, source: ConversionSource) -> Any:
        """Load the artifact with the runtime (configuration from ``self.settings``)."""

    @abstractmethod
    def run_impl(self, handle: Any, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run ``handle`` on ``feeds`` (one per input, in ``input_names`` order, NCHW as in
        the ONNX graph; the runner converts layouts it needs) and return the raw outputs in
        the artifact's output order.
        """

    # --- the base class's part (TODO: framework owner) -----------------------------------

    def activate_impl(self, job: ModelJob) -> None:  # TODO
        raise NotImplementedError

    def infer_impl(self, feed: np.ndarray) -> Capture:  # TODO
        raise NotImplementedError

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:  # TODO
        raise NotImplementedError

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        raise NotImplementedError  # TODO

    def version(self) -> str:  # TODO: runtime version from the descriptor's distributions
        raise NotImplementedError
