"""ConvTranspose paddle translator (``F.conv1d/2d/3d_transpose``, NCHW).

Paddle's kernels take ONNX's weight layout ``(C, M/group, k...)`` and begin/end padding
pairs, so most nodes map onto one kernel call, bias included. A window paddle cannot
express (negative pads, an output padding not below the stride or the dilation) runs the
kernel on the full transposed convolution and crops it by slicing or extends it with
``F.pad`` (:mod:`anpred.translate.transposed_window`), then adds the bias.
"""

from __future__ import annotations

from typing import Any

import paddle.nn.functional as F

from anpred.translate.registry import NodeCall, register
from anpred.translate.transposed_window import transposed_window

Tensor = Any

_CONV_T = {1: F.conv1d_transpose, 2: F.conv2d_transpose, 3: F.conv3d_transpose}


@register("paddle", "ConvTranspose")
def conv_transpose(call: NodeCall, x: Tensor, w: Tensor, b: Tensor = None) -> Tensor:
    """ONNX ConvTranspose: 1-3 spatial axes, strides, dilations, group, pads,
    output_padding, output_shape and ``auto_pad``.
    """
    shape = call.input_shapes[0] if call.input_shapes else None
    spatial = list(shape[2:]) if shape is not None else list(x.shape[2:])
    kernel = list(w.shape[2:])
    nd = len(kernel)
    win = transposed_window(call, spatial, kernel)
    strides, dilations = list(win.strides), list(win.dilations)
    kernel_fn = _CONV_T[nd]
    pads, extra = [], []
    for begin, out, full, s, d in zip(win.begin, win.out, win.full, strides, dilations,
                                      strict=True):  # fmt: skip
        crop = full - begin - out  # end pad, or (negative) the output padding
        pads.append((begin, max(crop, 0)))
        extra.append(max(-crop, 0) if begin >= 0 and -crop < max(s, d) else None)
    if None not in extra:
        padding = [v for pair in pads for v in pair]
        return kernel_fn(x, w, b, strides, padding, extra, dilation=dilations, groups=win.group)
    y = kernel_fn(x, w, None, strides, 0, 0, dilation=dilations, groups=win.group)
    index: list[slice] = [slice(None), slice(None)]
    grow = [0, 0, 0, 0]
    for begin, end_pad, full in zip(win.begin, win.end_pad, win.full, strict=True):
        index.append(slice(max(begin, 0), full + min(end_pad, 0)))
        grow += [max(-begin, 0), max(end_pad, 0)]
    y = y[tuple(index)]
    if any(grow):
        y = F.pad(y, grow, mode="constant", value=0.0)
    if b is not None:
        y = y + b.reshape([1, -1] + [1] * nd)
    return y
