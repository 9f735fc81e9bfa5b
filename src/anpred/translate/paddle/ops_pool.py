"""Window ops beside the pooling kernels: LpPool, MaxUnpool, Col2Im.

Paddle has no LpPool with pads or dilations and no MaxUnpool over ONNX's whole-tensor
indices, so both are composed from paddle ops (strided taps; ``put_along_axis``). Col2Im
is paddle's ``F.fold`` for 2-D images, composed for 1-D / 3-D ones.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.translate.paddle.ops_nn import _dilated_geometry, _pad_explicit, _taps
from anpred.translate.paddle.static_values import ints, static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any


@register("paddle", "LpPool")
def lp_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LpPool ``(sum |x|^p)^(1/p)`` over each window (pads count as 0).

    Composed: paddle's ``F.lp_pool*d`` takes no pads or dilations, so the windows of the
    zero-padded ``|x|^p`` are summed from strided taps (as dilated average pools are).
    """
    p = float(call.attr("p", 2))
    geometry = _dilated_geometry(call, x)
    powered = _pad_explicit(paddle.pow(paddle.abs(x), p), geometry["needed"], 0.0)
    total = functools.reduce(paddle.add, _taps(powered, geometry))
    # a tensor exponent: paddle.pow takes a Python float exponent as float32 (1/3: 1e-8 off)
    return paddle.pow(total, paddle.full([], 1.0 / p, dtype=total.dtype))


@register("paddle", "MaxUnpool")
def max_unpool(call: NodeCall, x: Tensor, indices: Tensor, output_shape: Tensor = None) -> Tensor:
    """ONNX MaxUnpool: each value to its flat index (MaxPool's Indices) in a zero tensor.

    The output shape is the ``output_shape`` input when given, else ``(in - 1) * stride +
    kernel - pads``. Composed with ``paddle.put_along_axis`` on the flattened output:
    ONNX's indices count over the whole tensor, ``F.max_unpool*d``'s per (n, c) plane.
    """
    if output_shape is not None:
        shape = ints(static_value(call, 2, "output_shape", output_shape))
    else:
        nd = x.ndim - 2
        kernel = list(call.attr("kernel_shape"))
        strides = list(call.attr("strides", [1] * nd))
        pads = list(call.attr("pads", [0] * (2 * nd)))
        shape = list(x.shape[:2]) + [
            (n - 1) * s + k - pads[i] - pads[i + nd]
            for i, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel, strict=True))
        ]
    flat = paddle.zeros([math.prod(shape)], dtype=x.dtype)
    index = paddle.reshape(paddle.cast(indices, "int64"), [-1])
    flat = paddle.put_along_axis(flat, index, paddle.reshape(x, [-1]), 0, broadcast=False)
    return paddle.reshape(flat, shape)


@register("paddle", "Col2Im")
def col2im(call: NodeCall, x: Tensor, image_shape: Tensor, block_shape: Tensor) -> Tensor:
    """ONNX Col2Im: ``F.fold`` for 2-D images; other ranks composed, each column entry
    added to its image position with ``paddle.put_along_axis(reduce="add")``.
    """
    image = ints(static_value(call, 1, "image_shape", image_shape))
    block = ints(static_value(call, 2, "block_shape", block_shape))
    nd = len(image)
    pads = list(call.attr("pads", [0] * (2 * nd)))
    dilations = list(call.attr("dilations", [1] * nd))
    strides = list(call.attr("strides", [1] * nd))
    if nd == 2:
        paddings = [pads[0], pads[1], pads[2], pads[3]]
        return F.fold(x, image, block, strides, paddings, dilations)
    counts = [
        (image[i] + pads[i] + pads[i + nd] - (dilations[i] * (block[i] - 1) + 1)) // strides[i] + 1
        for i in range(nd)
    ]
    offsets = np.meshgrid(*[np.arange(k) for k in block], indexing="ij")
    starts = np.meshgrid(*[np.arange(n) for n in counts], indexing="ij")
    flat = np.zeros((), dtype=np.int64)
    valid = np.ones((), dtype=bool)
    for i in range(nd):  # (kernel offsets, blocks) -> image position along axis i
        pos = (starts[i].reshape(1, -1) * strides[i] + offsets[i].reshape(-1, 1) * dilations[i]
               - pads[i])  # fmt: skip
        valid = valid & (pos >= 0) & (pos < image[i])
        flat = flat * image[i] + np.clip(pos, 0, image[i] - 1)
    n = int(x.shape[0])
    columns = paddle.reshape(x, [n, -1, flat.size])  # (N, C, kernel offsets * blocks)
    keep = np.nonzero(valid.reshape(-1))[0]
    columns = paddle.index_select(columns, paddle.to_tensor(keep), axis=2)
    channels = int(columns.shape[1])
    index = paddle.to_tensor(flat.reshape(-1)[keep].reshape(1, 1, -1))
    index = index.expand([n, channels, keep.size])
    out = paddle.zeros([n, channels, math.prod(image)], dtype=x.dtype)
    out = paddle.put_along_axis(out, index, columns, 2, reduce="add", broadcast=False)
    return paddle.reshape(out, [n, channels, *image])
