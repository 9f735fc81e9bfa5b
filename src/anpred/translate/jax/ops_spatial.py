"""Block rearrangement and cropping jax translators: SpaceToDepth, DepthToSpace,
CenterCropPad and Col2Im, composed of ``jnp.reshape``/``jnp.transpose``, slicing,
``jnp.pad`` and a scatter-add (``.at[].add``) with indices computed from static shapes.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from anpred.translate.col2im_positions import col2im_positions
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import static_ints
from anpred.translate.registry import NodeCall


def _mode(call: NodeCall) -> str:
    mode = call.attr("mode", "DCR")
    return mode.decode() if isinstance(mode, bytes) else str(mode)


@register("SpaceToDepth")
def space_to_depth(call: NodeCall, x: Any) -> Any:
    """ONNX SpaceToDepth: blocks to channels, DCR (block offset major, the default) or CRD
    (channel major, opset 25+).
    """
    b = int(call.attr("blocksize"))
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    perm = (0, 1, 3, 5, 2, 4) if _mode(call) == "CRD" else (0, 3, 5, 1, 2, 4)
    return jnp.transpose(y, perm).reshape(n, c * b * b, h // b, w // b)


@register("DepthToSpace")
def depth_to_space(call: NodeCall, x: Any) -> Any:
    """ONNX DepthToSpace: channels to blocks, DCR (default) or CRD."""
    b = int(call.attr("blocksize"))
    n, c, h, w = x.shape
    if _mode(call) == "CRD":
        y = jnp.transpose(x.reshape(n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))
    else:
        y = jnp.transpose(x.reshape(n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2))
    return y.reshape(n, c // (b * b), h * b, w * b)


@register("CenterCropPad")
def center_crop_pad(call: NodeCall, x: Any, shape: Any) -> Any:
    """ONNX CenterCropPad: crop or zero-pad each of ``axes`` (default all) to ``shape``.

    A crop starts at ``(size - target) // 2``; a pad puts ``(target - size) // 2`` before.
    """
    target = static_ints(call, 1, shape, "shape")
    axes = [int(a) % x.ndim for a in call.attr("axes", range(x.ndim))]
    for axis, want in zip(axes, target, strict=True):
        size = x.shape[axis]
        if want < size:
            start = (size - want) // 2
            x = jnp.take(x, jnp.arange(start, start + want), axis=axis)
        elif want > size:
            before = (want - size) // 2
            pads = [(0, 0)] * x.ndim
            pads[axis] = (before, want - size - before)
            x = jnp.pad(x, pads)
    return x


@register("Col2Im")
def col2im(call: NodeCall, x: Any, image_shape: Any, block_shape: Any) -> Any:
    """ONNX Col2Im: every column entry added at its image position (``.at[].add``; the
    positions are computed in NumPy from the static image and block shapes).
    """
    image = static_ints(call, 1, image_shape, "image_shape")
    block = static_ints(call, 2, block_shape, "block_shape")
    flat, valid = col2im_positions(call, image, block)
    n = x.shape[0]
    columns = x.reshape(n, -1, flat.size)  # (N, C, kernel offsets * blocks)
    keep = valid.reshape(-1)
    out = jnp.zeros((n, columns.shape[1], math.prod(image)), dtype=x.dtype)
    out = out.at[:, :, flat.reshape(-1)[keep]].add(columns[:, :, keep])
    return out.reshape(n, columns.shape[1], *image)
