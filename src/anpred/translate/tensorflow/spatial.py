"""Static window arithmetic shared by Conv and pooling: ONNX pads to TensorFlow padding.

Everything here works on Python integers (attributes and static shapes), never on data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from anpred.errors import AnpredError
from anpred.translate.registry import NodeCall

#: Per spatial dimension, the padding before and after.
Pads = list[tuple[int, int]]


def spatial_attrs(call: NodeCall, n: int, kernel: Sequence[int]) -> tuple[list[int], list[int]]:
    """Return ``(strides, dilations)`` of a windowed node (defaults 1)."""
    strides = [int(s) for s in call.attr("strides", [1] * n)]
    dilations = [int(d) for d in call.attr("dilations", [1] * n)]
    if len(strides) != n or len(dilations) != n or len(kernel) != n:
        raise AnpredError(
            f"tensorflow {call.op_type}: kernel/strides/dilations do not match {n} spatial "
            f"dimensions (node {call.name})"
        )
    return strides, dilations


def same_pads(
    size: int, kernel: int, stride: int, dilation: int = 1, upper: bool = True
) -> tuple[int, int]:
    """Return the padding of TensorFlow's ``"SAME"`` (``upper``) or ONNX's ``SAME_LOWER``."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def node_pads(
    call: NodeCall,
    sizes: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> Pads:
    """Return the padding a node asks for (``auto_pad`` or ``pads``), per spatial dimension.

    Raises:
        AnpredError: For an unknown ``auto_pad``.
    """
    n = len(kernel)
    auto_pad = call.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return [
            same_pads(sizes[i], kernel[i], strides[i], dilations[i], auto_pad == "SAME_UPPER")
            for i in range(n)
        ]
    if auto_pad == "VALID":
        return [(0, 0)] * n
    if auto_pad != "NOTSET":
        raise AnpredError(f"tensorflow {call.op_type}: unknown auto_pad {auto_pad!r}")
    pads = [int(p) for p in call.attr("pads", [0] * (2 * n))]
    return [(pads[i], pads[i + n]) for i in range(n)]


def ceil_extra(size: int, kernel: int, stride: int, pads: tuple[int, int]) -> int:
    """Extra end padding ``ceil_mode=1`` needs so that a VALID window sweep covers the output.

    The output length is ``ceil((size + pads - kernel) / stride) + 1``, less one when the
    last window would start in the end padding (PyTorch's and ONNX's rule).
    """
    begin, end = pads
    out = math.ceil((size + begin + end - kernel) / stride) + 1
    if (out - 1) * stride >= size + begin:
        out -= 1
    return max((out - 1) * stride + kernel - (size + begin + end), 0)


def tf_padding(
    pads: Pads,
    sizes: Sequence[int | None],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> str | list[list[int]]:
    """TensorFlow's ``padding`` argument for NHWC: ``"VALID"``, ``"SAME"`` or explicit."""
    if all(p == (0, 0) for p in pads):
        return "VALID"
    if all(s is not None for s in sizes):
        geometry = zip(sizes, kernel, strides, dilations, strict=True)
        if pads == [same_pads(int(s), k, st, d) for s, k, st, d in geometry]:
            return "SAME"
    return [[0, 0], *([b, e] for b, e in pads), [0, 0]]
