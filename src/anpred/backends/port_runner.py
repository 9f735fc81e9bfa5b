"""Abstract: a runner for a user's port (:mod:`anpred.ports`), whatever its library.

The port runs through its own code; its weights are compared with the reference's
(:mod:`anpred.ports.weights`, recorded in the settings under ``weights``). Each reference
anchor is the output of one of its layers: the layer ``anchor_map`` names for it, else the
layer named like the reference anchor's module path, else the next layer, in call order,
whose output has the anchor's shape (PaDiff's module walk); the map and how each entry was
found are recorded in the settings. A
library's port runner says how to build the port, find its layers, record (and, for stage
isolation, replace) one layer's output, call the port and convert tensors; this class does
the rest: the map (recorded in the settings), anchored / plain / isolated inference, and
the captures.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.errors import UsageError
from anpred.interchange.user_module import source_function
from anpred.ports.weights import compare_weights
from anpred.zoo.spec import OUTPUT_ANCHOR

#: Called with a layer's output; returns the output the port goes on with.
OutputHook = Callable[[Any], Any]


class PortRunner(Runner):
    """Abstract: see the module docstring."""

    #: The layout of the port's 4-D tensors (``NHWC`` for Keras' channels-last default).
    layout: str = "NCHW"

    def __init__(self, settings: Mapping[str, Any] | None = None, hooks: Any = None) -> None:
        super().__init__(settings, hooks)
        self.port: Any = None
        self.mapping: dict[str, str] = {}  # reference anchor -> port layer path
        self.records: dict[str, Any] = {}
        self.fed: dict[str, Any] = {}
        self.hooked = True
        self.weights: dict[str, Any] = {}
        self.matched: dict[str, str] = {}  # anchor -> how its layer was found

    @abstractmethod
    def check_port(self, port: Any) -> None:
        """Raise :class:`UsageError` when ``port`` is not a model of this library."""

    @abstractmethod
    def layers(self, port: Any) -> dict[str, Any]:
        """The port's layers by path."""

    @abstractmethod
    def hook_layer(self, layer: Any, hook: OutputHook) -> None:
        """Make ``layer`` pass its output through ``hook``."""

    @abstractmethod
    def call(self, feed: np.ndarray) -> Any:
        """Run the port on one input (in the reference's layout)."""

    @abstractmethod
    def tensors(self, value: Any) -> list[Any]:
        """The tensors of a layer's or the port's output, in order."""

    @abstractmethod
    def to_numpy(self, tensor: Any) -> np.ndarray:
        """One tensor as an array, in the port's layout."""

    @abstractmethod
    def to_tensor(self, array: np.ndarray) -> Any:
        """A fed anchor (reference layout) as the port's tensor, in the port's layout."""

    @abstractmethod
    def parameters(self) -> list[tuple[str, np.ndarray]]:
        """The port's trainable parameters, in its own order (for the weights check)."""

    def activate_impl(self, job: ModelJob) -> None:
        assert job.port is not None
        start = time.perf_counter()
        port = source_function(job.port.source)()
        self.check_port(port)
        self.port = port
        self._timed("build", start)
        layers = self.layers(port)
        given = {anchor: path for path, anchor in job.port.anchor_map}
        unmapped = []
        for record in job.export.anchors:
            if record.anchor == OUTPUT_ANCHOR or record.anchor in self.mapping:
                continue
            path = given.get(record.anchor, record.module)
            if path in layers:
                self.mapping[record.anchor] = path
                self.matched[record.anchor] = "anchor_map" if record.anchor in given else "name"
            elif record.anchor in given:
                raise UsageError(f"anchor_map names {path!r}, which is not a layer of the port")
            elif record.anchor not in {r.anchor for r in unmapped}:
                unmapped.append(record)
        if unmapped:
            self._match_by_order_and_shape(job, layers, unmapped)
        for anchor, path in self.mapping.items():
            self.hook_layer(layers[path], self._hook(anchor))
        self.weights = compare_weights(self.parameters(), job.export.folder)
        self.step = Step.EXECUTE

    def _match_by_order_and_shape(
        self, job: ModelJob, layers: dict[str, Any], unmapped: list[Any]
    ) -> None:
        """Map each unmapped anchor to the next layer, in call order, whose output has the
        anchor's shape (PaDiff's module walk): one forward pass on zeros records them.
        """
        calls: list[tuple[str, tuple[int, ...]]] = []
        probing = [True]

        def probe(path: str) -> OutputHook:
            def record(output: Any) -> Any:
                found = self.tensors(output)
                if probing[0] and len(found) == 1:
                    shape = tuple(int(d) for d in found[0].shape)
                    if len(shape) == 4 and self.layout == "NHWC":
                        shape = (shape[0], shape[3], shape[1], shape[2])
                    calls.append((path, shape))
                return output

            return record

        for path, layer in layers.items():
            self.hook_layer(layer, probe(path))
        self.call(np.zeros(job.export.input_shape, dtype=np.float32))
        probing[0] = False
        used, position = set(self.mapping.values()), 0
        for record in unmapped:
            found = next(
                (i for i in range(position, len(calls))
                 if calls[i][1] == tuple(record.shape) and calls[i][0] not in used),
                None,
            )  # fmt: skip
            if found is None:
                raise UsageError(
                    f"no layer of the port, after those matched, outputs {record.shape} for "
                    f"anchor {record.anchor}; name its layer in anchor_map"
                )
            self.mapping[record.anchor] = calls[found][0]
            self.matched[record.anchor] = "order and shape"
            used.add(calls[found][0])
            position = found + 1

    def _hook(self, anchor: str) -> OutputHook:
        def record(output: Any) -> Any:
            if not self.hooked:
                return output
            self.records[anchor] = output
            return self.fed.get(anchor, output)

        return record

    def _capture(self, output: Any) -> Capture:
        capture = Capture({})
        for record in self.job.export.anchors:
            if record.anchor == OUTPUT_ANCHOR:
                value = self.tensors(output)[0]
            else:
                index = int(record.key.split(":")[1]) if ":" in record.key else 0
                value = self.tensors(self.records.get(record.anchor))[index]
            array = self.to_numpy(value)
            capture.arrays[record.key] = array
            if array.ndim == 4 and self.layout != "NCHW":
                capture.layouts[record.key] = self.layout
        return capture

    def infer_impl(self, feed: np.ndarray) -> Capture:
        self.records, self.fed, self.hooked = {}, {}, True
        return self._capture(self.call(feed))

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        self.hooked = False
        try:
            return self.to_numpy(self.tensors(self.call(feed))[0])
        finally:
            self.hooked = True

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        self.records, self.hooked = {}, True
        self.fed = {n: self.to_tensor(v) for n, v in anchors.items() if n in self.mapping}
        try:
            return self._capture(self.call(feed))
        finally:
            self.fed = {}

    def describe_settings(self) -> dict[str, Any]:
        """How the port ran: its source and which of its layers stands for each anchor."""
        return {
            "execution": f"the user's port (its own {self.library} code)",
            "source": self.job.port.source if self.job.port else None,
            "layout": self.layout,
            "anchor_map": dict(self.mapping),
            "anchor_map_by": dict(self.matched),
            # the port's parameters against the reference's: a transfer error shows here
            "weights": self.weights,
        }
