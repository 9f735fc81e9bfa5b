"""A user's port to PaddlePaddle: their ``paddle.nn.Layer``, anchors by forward post hooks.

The port runs through its own code (not anpred's translator). Each reference anchor is the
output of one of the port's layers: the layer ``anchor_map`` names for it, else the layer
with the reference anchor's module path (a port that keeps the reference's attribute
names needs no map). Stage isolation replaces those layers' outputs with the fed anchors.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, final

import numpy as np
import paddle

from anpred.backends.base import Capture, ModelJob, Runner, Step
from anpred.errors import UsageError
from anpred.interchange.user_module import source_function
from anpred.zoo.spec import OUTPUT_ANCHOR


def _tensors(value: Any) -> list[Any]:
    if isinstance(value, paddle.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    return []


@final
class PaddlePortRunner(Runner):
    """The user's ``paddle.nn.Layer``; the anchor map is recorded in its settings."""

    library = "paddle"

    def __init__(self, settings: Mapping[str, Any] | None = None, hooks: Any = None) -> None:
        super().__init__(settings, hooks)
        self.layer: Any = None
        self.mapping: dict[str, str] = {}  # reference anchor -> port layer path
        self.records: dict[str, Any] = {}
        self.fed: dict[str, Any] = {}
        self.hooked = True

    def activate_impl(self, job: ModelJob) -> None:
        assert job.port is not None
        paddle.set_device("cpu")
        paddle.seed(job.seed)
        start = time.perf_counter()
        layer = source_function(job.port.source)()
        if not isinstance(layer, paddle.nn.Layer):
            raise UsageError(f"{job.port.source} gave a {type(layer).__name__}, not a paddle Layer")
        self.layer = layer
        layer.eval()
        self._timed("build", start)
        sublayers = dict(layer.named_sublayers())
        given = {anchor: path for path, anchor in job.port.anchor_map}
        for record in job.export.anchors:
            if record.anchor == OUTPUT_ANCHOR or record.anchor in self.mapping:
                continue
            path = given.get(record.anchor, record.module)
            if path not in sublayers:
                raise UsageError(
                    f"the port has no layer {path!r} for anchor {record.anchor}; name it in "
                    "anchor_map (port layer path -> reference anchor)"
                )
            self.mapping[record.anchor] = path
            sublayers[path].register_forward_post_hook(self._hook(record.anchor))
        self.step = Step.EXECUTE

    def _hook(self, anchor: str) -> Any:
        def record(_layer: Any, _inputs: Any, output: Any) -> Any:
            if not self.hooked:
                return None
            self.records[anchor] = output
            if anchor in self.fed:
                return self.fed[anchor]
            return None

        return record

    def _call(self, feed: np.ndarray) -> Any:
        with paddle.no_grad():
            return self.layer(paddle.to_tensor(np.ascontiguousarray(feed, dtype=np.float32)))

    def _capture(self, output: Any) -> Capture:
        arrays: dict[str, np.ndarray] = {}
        for record in self.job.export.anchors:
            if record.anchor == OUTPUT_ANCHOR:
                value = _tensors(output)[0]
            else:
                found = _tensors(self.records.get(record.anchor))
                index = int(record.key.split(":")[1]) if ":" in record.key else 0
                value = found[index]
            arrays[record.key] = value.numpy()
        return Capture(arrays)

    def infer_impl(self, feed: np.ndarray) -> Capture:
        self.records, self.fed, self.hooked = {}, {}, True
        return self._capture(self._call(feed))

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        self.hooked = False
        try:
            return _tensors(self._call(feed))[0].numpy()
        finally:
            self.hooked = True

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        self.records, self.hooked = {}, True
        self.fed = {
            name: paddle.to_tensor(np.asarray(value, dtype=np.float32))
            for name, value in anchors.items()
            if name in self.mapping
        }
        try:
            return self._capture(self._call(feed))
        finally:
            self.fed = {}

    def version(self) -> str:
        return str(paddle.__version__)

    def describe_settings(self) -> dict[str, Any]:
        """How the port ran: its source and which of its layers stands for each anchor."""
        return {
            "execution": "the user's port (its own paddle code)",
            "source": self.job.port.source if self.job.port else None,
            "anchor_map": dict(self.mapping),
        }
