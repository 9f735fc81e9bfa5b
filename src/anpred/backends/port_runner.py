"""Abstract: a runner for a user's port (:mod:`anpred.ports`), whatever its library.

The port runs through its own code; its weights are compared with the reference's
(:mod:`anpred.ports.weights`, recorded in the settings under ``weights``). Each reference
anchor is the output of one of its layers: the layer ``anchor_map`` names for it, else the
layer named like the reference anchor's module path; every other layer is left alone. A
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
        for record in job.export.anchors:
            if record.anchor == OUTPUT_ANCHOR or record.anchor in self.mapping:
                continue
            path = given.get(record.anchor, record.module)
            if path not in layers:
                raise UsageError(
                    f"the port has no layer {path!r} for anchor {record.anchor}; name it in "
                    "anchor_map (port layer path -> reference anchor)"
                )
            self.mapping[record.anchor] = path
            self.hook_layer(layers[path], self._hook(record.anchor))
        self.weights = compare_weights(self.parameters(), job.export.folder)
        self.step = Step.EXECUTE

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
            # the port's parameters against the reference's: a transfer error shows here
            "weights": self.weights,
        }
