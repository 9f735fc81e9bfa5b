"""ONNX Upsample (opset 7-9, deprecated) as the Resize node it is equivalent to.

Upsample scales every axis by ``scales`` (an attribute in opset 7, a static input from
opset 9) with ``asymmetric`` coordinates: mode ``nearest`` rounds down (``floor``), mode
``linear`` (``bilinear`` in early exporters) interpolates. The translators that have a
Resize translator call it with the node this module builds, so Upsample runs through the
same library kernels.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from anpred.errors import UsageError
from anpred.translate.registry import NodeCall

#: Opset of the Resize node built (scales are input 2, sizes input 3).
RESIZE_OPSET = 13


def upsample_scales(call: NodeCall) -> np.ndarray:
    """Return the static scales of an Upsample node (attribute or input 1)."""
    value = call.const(1) if call.opset >= 9 else call.attr("scales")
    if value is None:
        raise UsageError(
            f"Upsample scales of node {call.name} must be static (an initializer or a "
            "Constant); export the model with static shapes"
        )
    return np.asarray(value, dtype=np.float32).reshape(-1)


def as_resize(call: NodeCall) -> NodeCall:
    """Return the opset-13 Resize node that computes what Upsample node ``call`` does."""
    mode = call.attr("mode", "nearest")
    if isinstance(mode, bytes):
        mode = mode.decode()
    mode = {"bilinear": "linear", "trilinear": "linear"}.get(mode, mode)
    attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
    if mode == "nearest":
        attrs["nearest_mode"] = "floor"
    shape = call.input_shapes[0] if call.input_shapes else None
    return dataclasses.replace(
        call,
        op_type="Resize",
        attrs=attrs,
        opset=max(call.opset, RESIZE_OPSET),
        consts=(call.const(0), None, upsample_scales(call), None),
        input_shapes=(shape, None, None, None),
    )
