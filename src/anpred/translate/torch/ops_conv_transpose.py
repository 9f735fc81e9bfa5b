"""ConvTranspose torch translator (NCHW, ``F.conv_transpose1d/2d/3d``).

Where ONNX's window is one torch can express (equal begin/end pads, an output padding below
the stride or the dilation) torch's kernel does everything, bias included. Otherwise the
kernel computes the full transposed convolution and ``F.pad`` crops it (negative pads) or
extends it with zeros (:mod:`anpred.translate.transposed_window`), then the bias is added.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.windows import torch_pad
from anpred.translate.transposed_window import transposed_window

_LIB = "torch"

Tensor = torch.Tensor

_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@register(_LIB, "ConvTranspose")
def conv_transpose(call: NodeCall, x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    """ONNX ConvTranspose: 1-3 spatial axes, strides, dilations, group, pads, output_padding,
    output_shape and ``auto_pad``.
    """
    nd = x.ndim - 2
    win = transposed_window(call, list(x.shape[2:]), list(w.shape[2:]))
    kernel = _CONV_T[nd]
    strides, dilations = list(win.strides), list(win.dilations)
    output_padding = [o - f + 2 * p for o, f, p in zip(win.out, win.full, win.begin, strict=True)]
    if all(
        p >= 0 and 0 <= op < max(s, d)
        for p, op, s, d in zip(win.begin, output_padding, strides, dilations, strict=True)
    ):
        return kernel(x, w, b, strides, list(win.begin), output_padding, win.group, dilations)
    y = kernel(x, w, None, strides, 0, 0, win.group, dilations)
    if not win.trivial:
        y = F.pad(y, torch_pad([-p for p in win.begin], list(win.end_pad)))
    if b is not None:
        y = y + b.reshape(1, -1, *([1] * nd))
    return y
