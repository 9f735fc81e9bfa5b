"""Spatial resampling torch translators: GridSample, AffineGrid, Col2Im, CenterCropPad."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor

#: ONNX GridSample modes (opset 16 names and opset 20 names) -> ``F.grid_sample``'s.
_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest",
               "bicubic": "bicubic", "cubic": "bicubic"}  # fmt: skip


def _ints(call: NodeCall, index: int, value: Tensor | None) -> list[int]:
    static = call.const(index)
    if static is not None:
        return [int(v) for v in np.asarray(static).reshape(-1)]
    if value is None:
        return []
    return [int(v) for v in value.reshape(-1).tolist()]


@register(_LIB, "GridSample")
def grid_sample(call: NodeCall, x: Tensor, grid: Tensor) -> Tensor:
    """ONNX GridSample: ``F.grid_sample`` (2-D: linear, nearest, cubic; 3-D: linear, nearest).

    ``padding_mode`` zeros, border or reflection; ``align_corners``.
    """
    mode = _GRID_MODES[call.attr("mode", "bilinear" if call.opset < 20 else "linear")]
    return F.grid_sample(
        x,
        grid,
        mode=mode,
        padding_mode=call.attr("padding_mode", "zeros"),
        align_corners=bool(call.attr("align_corners", 0)),
    )


@register(_LIB, "AffineGrid")
def affine_grid(call: NodeCall, theta: Tensor, size: Tensor) -> Tensor:
    """ONNX AffineGrid: the sampling grid of 2-D or 3-D affine matrices, ``F.affine_grid``."""
    return F.affine_grid(
        theta, _ints(call, 1, size), align_corners=bool(call.attr("align_corners", 0))
    )


@register(_LIB, "Col2Im")
def col2im(call: NodeCall, x: Tensor, image_shape: Tensor, block_shape: Tensor) -> Tensor:
    """ONNX Col2Im: ``F.fold`` for 2-D images with symmetric pads; other images (3-D,
    asymmetric pads) add each column entry to its image position with ``index_add``.
    """
    image, block = _ints(call, 1, image_shape), _ints(call, 2, block_shape)
    nd = len(image)
    pads = list(call.attr("pads", [0] * (2 * nd)))
    dilations = list(call.attr("dilations", [1] * nd))
    strides = list(call.attr("strides", [1] * nd))
    if nd == 2 and pads[:2] == pads[2:]:
        return F.fold(x, image, block, dilation=dilations, padding=pads[:2], stride=strides)
    counts = [
        (image[i] + pads[i] + pads[i + nd] - (dilations[i] * (block[i] - 1) + 1)) // strides[i] + 1
        for i in range(nd)
    ]
    offsets = torch.meshgrid(*[torch.arange(k) for k in block], indexing="ij")
    starts = torch.meshgrid(*[torch.arange(n) for n in counts], indexing="ij")
    flat = torch.zeros((), dtype=torch.int64)
    valid = torch.ones((), dtype=torch.bool)
    for i in range(nd):  # (kernel offsets, blocks) -> image position along axis i
        pos = (starts[i].reshape(1, -1) * strides[i] + offsets[i].reshape(-1, 1) * dilations[i]
               - pads[i])  # fmt: skip
        valid = valid & (pos >= 0) & (pos < image[i])
        flat = flat * image[i] + pos.clamp(0, image[i] - 1)
    n = x.shape[0]
    columns = x.reshape(n, -1, flat.numel())  # (N, C, kernel offsets * blocks)
    out = torch.zeros((n, columns.shape[1], math.prod(image)), dtype=x.dtype)
    keep = valid.reshape(-1)
    out = out.index_add(2, flat.reshape(-1)[keep], columns[:, :, keep])
    return out.reshape(n, columns.shape[1], *image)


@register(_LIB, "CenterCropPad")
def center_crop_pad(call: NodeCall, x: Tensor, shape: Tensor) -> Tensor:
    """ONNX CenterCropPad: crop or zero-pad each of ``axes`` (default all) to ``shape``.

    A crop starts at ``(size - target) // 2``; a pad puts ``(target - size) // 2`` before.
    """
    target = _ints(call, 1, shape)
    axes = [int(a) % x.ndim for a in call.attr("axes", range(x.ndim))]
    for axis, want in zip(axes, target, strict=True):
        size = x.shape[axis]
        if want < size:
            x = torch.narrow(x, axis, (size - want) // 2, want)
        elif want > size:
            before = (want - size) // 2
            pad = [0, 0] * (x.ndim - 1 - axis) + [before, want - size - before]
            x = F.pad(x, pad)
    return x
