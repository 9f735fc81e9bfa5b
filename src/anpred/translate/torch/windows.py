"""Sliding-window geometry of ONNX Conv and pooling: pads, output sizes, torch pad order.

Pure index arithmetic on static attributes and shapes (no tensors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from anpred.translate.registry import NodeCall


def resolve_pads(
    call: NodeCall,
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> tuple[list[int], list[int]]:
    """Return the (begin, end) pads per spatial axis, resolving ``auto_pad``.

    ``SAME_UPPER``/``SAME_LOWER`` give ``ceil(in / stride)`` outputs and put the odd pad at
    the end / the beginning; ``VALID`` pads nothing; ``NOTSET`` uses ``pads`` (default 0).
    """
    nd = len(spatial)
    auto_pad = call.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
            out = math.ceil(size / s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return begin, end
    if auto_pad == "VALID":
        return [0] * nd, [0] * nd
    pads = list(call.attr("pads", [0] * (2 * nd)))
    return pads[:nd], pads[nd:]


def pool_output_size(
    size: int, begin: int, end: int, kernel: int, stride: int, dilation: int, ceil_mode: bool
) -> int:
    """Output length of a pooling window along one axis (ONNX rule, as in torch).

    In ceil mode a last window that would start in the end padding is dropped.
    """
    span = size + begin + end - ((kernel - 1) * dilation + 1)
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + begin:
        out -= 1
    return out


def torch_pad(begin: Sequence[int], end: Sequence[int]) -> list[int]:
    """``F.pad`` order (last axis first) of per-axis begin/end pads of trailing axes."""
    order: list[int] = []
    for b, e in zip(reversed(begin), reversed(end), strict=True):
        order += [int(b), int(e)]
    return order
