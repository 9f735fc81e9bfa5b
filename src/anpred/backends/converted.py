"""Runners of deployment runtimes: a real converter's artifact made from the anchored model.

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

import functools
import importlib.metadata
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.base import (  # the two failures are re-exported: runtimes import them here
    Capture,
    IsolationUnavailable,
    ModelJob,
    ParticipantFailure,
    Runner,
    Step,
)
from anpred.backends.conversion import one_line
from anpred.backends.output_map import OutputMap, OutputMapError, map_outputs
from anpred.library import get_library
from anpred.zoo.spec import OUTPUT_ANCHOR


class ConversionError(Exception):
    """A converter failed; ``str(err)`` is its one-line reason."""


class ConversionFailed(ParticipantFailure):
    """The conversion failed: the participant's error is ``conversion failed: <reason>``."""

    step = Step.CONVERT

    def __init__(self, reason: str) -> None:
        super().__init__(f"conversion failed: {reason}")
        self.reason = reason


class OutputMappingFailed(ParticipantFailure):
    """The artifact's outputs cannot be mapped to the anchors."""

    step = Step.CAPTURE

    def __init__(self, reason: str) -> None:
        super().__init__(f"output mapping failed: {reason}")


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
    #: Settings that only the runtime reads (load/run), never the converter: left out of
    #: the conversion cache key, so configurations differing only in them share one
    #: conversion.
    runtime_settings: tuple[str, ...] = ()
    #: Rank → the layout the converter gives outputs of that rank whatever their shape
    #: (:func:`anpred.backends.output_map.layouts_of` names); decides square tensors.
    known_layouts: dict[int, str] = {}  # noqa: RUF012 - read-only class constant

    def conversion_settings(self) -> dict[str, Any]:
        """The settings the conversion depends on (its cache key): all but
        :attr:`runtime_settings`.
        """
        return {k: v for k, v in self.settings.items() if k not in self.runtime_settings}

    def select_artifact(self, artifact: Path) -> Path:
        """The file this configuration loads, out of the conversion's ``artifact``.

        A converter that writes several variants at once (onnx2tf: float32 and float16
        models) returns one of them from :meth:`convert_impl`; a runner whose choice among
        them is a runtime setting overrides this to pick its own. Raise
        :class:`ConversionError` when the variant is missing or the setting invalid.
        """
        return artifact

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

    def artifact_output_names(self, handle: Any) -> Sequence[str] | None:
        """Names of the artifact's outputs in :meth:`run_impl`'s order, if it has names
        (recorded with the output mapping; optional).
        """
        return None

    # --- the base class's part ------------------------------------------------------------
    # (``on_step`` and ``reference``, declared by ``Runner``: the worker records each step,
    # so that a converter that crashes or hangs is named at step ``convert``; the reference
    # is used only by the values rule of the output mapping)

    def _set_step(self, step: Step) -> None:
        self.step = step
        if self.on_step is not None:
            self.on_step(step)

    @property
    def wants_reference(self) -> bool:
        """Whether the output mapping is still to be decided (on the next inference)."""
        return "anchored" not in self._maps if hasattr(self, "_maps") else True

    def activate_impl(self, job: ModelJob) -> None:
        import onnx

        self._maps: dict[str, OutputMap] = {}
        self._loaded: dict[str, tuple[ConversionSource, Any]] = {}
        self._records: dict[str, dict[str, Any]] = {}
        self._isolation_error = ""
        anchored = onnx.load(str(job.export.anchored_path))
        self._anchored_model = anchor_ordered(anchored, [a.onnx_name for a in job.export.anchors])
        self._load_kind("anchored", self._anchored_model)
        self._load_kind("plain", onnx.load(str(job.export.plain_path)))

    def _load_kind(self, kind: str, model: Any) -> tuple[ConversionSource, Any]:
        """Convert (or take from the cache) and load one model; raises ConversionFailed."""
        from anpred.backends.conversion import ConversionFailure, convert_cached

        self._set_step(Step.CONVERT)
        start = time.perf_counter()
        make = functools.partial(
            ConversionSource,
            kind=kind,
            zoo_model=self.job.zoo_model,
            settings=dict(self.settings),
        )
        try:
            converted = convert_cached(
                model,
                self.library,
                self.conversion_settings(),
                self.converter_version(),
                self.needs_slim,
                make,
                self.convert_impl,
            )
        except ConversionFailure as err:
            self._records[kind] = {"ok": False, "reason": err.reason}
            where = "" if kind == "anchored" else f" ({kind} model)"
            raise ConversionFailed(f"{err.reason}{where}") from err
        self._timed(f"convert_{kind}", start)
        try:
            artifact = self.select_artifact(converted.artifact)
        except ConversionError as err:
            raise ConversionFailed(str(err)) from err
        self._records[kind] = {**converted.record, "artifact": str(artifact)}
        self._set_step(Step.COMPILE)
        start = time.perf_counter()
        handle = self.load_impl(artifact, converted.source)
        self._timed(f"load_{kind}", start)
        self._loaded[kind] = (converted.source, handle)
        return self._loaded[kind]

    def _keys(self, source: ConversionSource) -> list[tuple[str, tuple[int, ...]]]:
        """(anchor key, graph shape) of each output of ``source``, in its order."""
        by_name = {a.onnx_name: a.key for a in self.job.export.anchors}
        return [
            (by_name.get(name, name), shape)
            for name, shape in zip(source.output_names, source.output_shapes, strict=True)
        ]

    def _run_mapped(
        self,
        kind: str,
        feeds: Sequence[np.ndarray],
        reference: Mapping[str, np.ndarray] | None,
    ) -> dict[str, np.ndarray]:
        source, handle = self._loaded[kind]
        raw = [np.asarray(r) for r in self.run_impl(handle, list(feeds))]
        keys = self._keys(source)
        if kind not in self._maps:
            try:
                names = self.artifact_output_names(handle)
                self._maps[kind] = map_outputs(keys, raw, names, reference, self.known_layouts)
            except OutputMapError as err:
                raise OutputMappingFailed(f"{kind} model: {err}") from err
            self._records[kind]["output_map"] = self._maps[kind].to_dict()
        return self._maps[kind].apply(raw, dict(keys))

    def infer_impl(self, feed: np.ndarray) -> Capture:
        arrays = self._run_mapped("anchored", [feed], self.reference)
        self._last_output = arrays.get(OUTPUT_ANCHOR)
        return Capture(arrays)

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        last = getattr(self, "_last_output", None)
        reference = {OUTPUT_ANCHOR: last} if last is not None else None
        arrays = self._run_mapped("plain", [feed], reference)
        return next(iter(arrays.values()))

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        from anpred.interchange.isolation import fed_name, isolation_model

        if self._isolation_error:
            raise IsolationUnavailable(self._isolation_error)
        names = [a.onnx_name for a in self.job.export.anchors]
        by_name = {a.onnx_name: a.key for a in self.job.export.anchors}
        try:
            if "isolation" not in self._loaded:
                model, _ = isolation_model(self._anchored_model, names)
                self._load_kind("isolation", model)
            source, _ = self._loaded["isolation"]
            fed = {fed_name(n): by_name[n] for n in names}
            model_input = self.job.export.input_name
            feeds = [feed if n == model_input else anchors[fed[n]] for n in source.input_names]
            arrays = self._run_mapped("isolation", feeds, anchors)
        except (ConversionFailed, OutputMappingFailed, KeyError) as err:
            self._isolation_error = one_line(err)
            raise IsolationUnavailable(self._isolation_error) from err
        except Exception as err:  # the runtime cannot run the isolation model
            self._isolation_error = f"{err.__class__.__name__}: {one_line(err)}"
            raise IsolationUnavailable(self._isolation_error) from err
        return Capture(arrays)

    def conversion_record(self) -> dict[str, Any]:
        """What was converted, from the cache or not, and how outputs map to anchors (the
        participant's conversion record in the run store).
        """
        library = get_library(self.library)
        try:
            converter_version = self.converter_version()
        except Exception as err:  # a broken converter install: say so, keep the record
            converter_version = f"? ({err.__class__.__name__}: {one_line(err)})"
        record: dict[str, Any] = {
            "runtime": self.library,
            "runtime_version": self.version(),
            "converter": library.converter,
            "converter_version": converter_version,
            "needs_slim": self.needs_slim,
            "models": dict(getattr(self, "_records", {})),
        }
        if getattr(self, "_isolation_error", ""):
            record["isolation"] = f"isolation unavailable: {self._isolation_error}"
        return record

    def version(self) -> str:
        for dist in get_library(self.library).distributions:
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return "?"

    def describe_settings(self) -> dict[str, Any]:
        return {
            **self.settings,
            "threads": self.threads,
            "converter": get_library(self.library).converter,
            "converter_version": self.converter_version(),
        }


def anchor_ordered(model: Any, names: Sequence[str]) -> Any:
    """``model`` with its graph outputs in the export's anchor order (``names``), so that a
    converter that keeps the order keeps the anchors' order.
    """
    import onnx

    ordered = onnx.ModelProto()
    ordered.CopyFrom(model)
    by_name = {o.name: o for o in model.graph.output}
    outputs = [by_name[n] for n in names if n in by_name]
    outputs += [o for o in model.graph.output if o.name not in set(names)]
    del ordered.graph.output[:]
    ordered.graph.output.extend(outputs)
    return ordered
