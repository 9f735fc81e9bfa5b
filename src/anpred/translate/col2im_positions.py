"""Where ONNX Col2Im puts each column entry: a NumPy table from the static geometry.

Library-neutral: the jax and tensorflow translators add the columns at these positions
with their own scatter-add kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def col2im_geometry(
    call: Any, image: Sequence[Any], block: Sequence[Any]
) -> tuple[list[int], list[int], list[int], list[Any]]:
    """Col2Im's ``pads``, ``dilations`` and ``strides`` and the number of blocks along each
    spatial axis; ``image`` and ``block`` may be ints or a library's scalars (shapes fed at
    run time), the counts are then the library's too.
    """
    nd = len(image)
    pads = [int(p) for p in call.attr("pads", [0] * (2 * nd))]
    dilations = [int(d) for d in call.attr("dilations", [1] * nd)]
    strides = [int(s) for s in call.attr("strides", [1] * nd)]
    counts = [
        (image[i] + pads[i] + pads[i + nd] - (dilations[i] * (block[i] - 1) + 1)) // strides[i] + 1
        for i in range(nd)
    ]
    return pads, dilations, strides, counts


def col2im_positions(
    call: Any, image: Sequence[int], block: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Flat image position of every (kernel offset, block) entry, and whether it is inside.

    Args:
        call: The Col2Im node (its ``pads``, ``dilations`` and ``strides`` attributes).
        image: The image's spatial shape.
        block: The block (kernel) shape.

    Returns:
        ``(flat, valid)``, both of shape (kernel offsets, blocks): the row-major position in
        the image (clipped into it) and whether the entry falls inside, not in the padding.
    """
    nd = len(image)
    pads, dilations, strides, counts = col2im_geometry(call, image, block)
    offsets = np.meshgrid(*[np.arange(k) for k in block], indexing="ij")
    starts = np.meshgrid(*[np.arange(n) for n in counts], indexing="ij")
    flat = np.zeros((), np.int64)
    valid = np.ones((), bool)
    for i in range(nd):  # (kernel offsets, blocks) -> image position along axis i
        pos = starts[i].reshape(1, -1) * strides[i] + offsets[i].reshape(-1, 1) * dilations[i]
        pos = pos - pads[i]
        valid = valid & (pos >= 0) & (pos < image[i])
        flat = flat * image[i] + np.clip(pos, 0, image[i] - 1)
    return flat, valid
