"""ConvTranspose jax translator: ``lax.conv_general_dilated`` with ``lhs_dilation``.

A transposed convolution is the convolution of the stride-dilated input with the flipped,
in/out-swapped kernel, padded by ``span - 1`` on both sides (the full result); ONNX's pads,
output padding and ``output_shape`` shrink (negative padding) or grow that padding
(:mod:`anpred.translate.transposed_window`). ``lax.conv_transpose`` is the same
construction but takes no groups.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from anpred.translate.jax.numerics import current
from anpred.translate.jax.ops_nn import _CONV_LAYOUTS
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall
from anpred.translate.transposed_window import transposed_window


@register("ConvTranspose")
def conv_transpose(call: NodeCall, x: Any, w: Any, b: Any = None) -> Any:
    """ONNX ConvTranspose: 1-3 spatial axes, strides, dilations, group, pads,
    output_padding, output_shape and ``auto_pad``.
    """
    n = w.ndim - 2
    kernel = list(w.shape[2:])
    win = transposed_window(call, list(x.shape[2:]), kernel)
    g = win.group
    c_in, m_per_group = int(w.shape[0]), int(w.shape[1])
    # (C, M/g, k...) -> (g, M/g, C/g, k...) -> (M, C/g, k...), spatially flipped
    w = w.reshape((g, c_in // g, m_per_group, *kernel))
    w = jnp.swapaxes(w, 1, 2).reshape((g * m_per_group, c_in // g, *kernel))
    w = jnp.flip(w, axis=tuple(range(2, 2 + n)))
    pads = [
        ((k - 1) * d - begin, (k - 1) * d + end)
        for k, d, begin, end in zip(kernel, win.dilations, win.begin, win.end_pad, strict=True)
    ]
    y = lax.conv_general_dilated(
        x,
        w,
        window_strides=[1] * n,
        padding=pads,
        lhs_dilation=win.strides,
        rhs_dilation=win.dilations,
        dimension_numbers=_CONV_LAYOUTS[n],
        feature_group_count=g,
        precision=current().precision,
    )
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * n)
    return y
