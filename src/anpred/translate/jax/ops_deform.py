"""DeformConv jax translator (2-D), composed: jax has no deformable-convolution kernel.

Every kernel tap of every output position samples the input bilinearly at its offset
position (corners outside the image count as zero, as torchvision's kernel and ONNX's
reference do), is scaled by the optional mask, and the samples are contracted with the
weights per group by ``jnp.einsum``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from anpred.translate.jax.numerics import current
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


def _bilinear(grouped: Any, y: Any, x: Any) -> Any:
    """Samples of ``grouped`` (N, G, C/G, H, W) at float positions ``y``, ``x`` (N, G, ...)
    -> (N, G, ..., C/G); out-of-image corners are zero.
    """
    n, g, _, height, width = grouped.shape
    extra = (1,) * (y.ndim - 2)
    batch = jnp.arange(n).reshape((n, 1, *extra))
    group = jnp.arange(g).reshape((1, g, *extra))
    y0, x0 = jnp.floor(y), jnp.floor(x)
    out = None
    for dy in (0, 1):
        for dx in (0, 1):
            yc, xc = y0 + dy, x0 + dx
            weight = (1 - jnp.abs(y - yc)) * (1 - jnp.abs(x - xc))
            inside = (yc >= 0) & (yc <= height - 1) & (xc >= 0) & (xc <= width - 1)
            yi = jnp.clip(yc, 0, height - 1).astype(jnp.int32)
            xi = jnp.clip(xc, 0, width - 1).astype(jnp.int32)
            picked = grouped[batch, group, :, yi, xi]  # (N, G, ..., C/G)
            term = picked * jnp.where(inside, weight, 0).astype(grouped.dtype)[..., None]
            out = term if out is None else out + term
    return out


@register("DeformConv")
def deform_conv(
    call: NodeCall, x: Any, w: Any, offset: Any, b: Any = None, mask: Any = None
) -> Any:
    """ONNX DeformConv (2-D): strides, pads, dilations, ``group``, ``offset_group``, mask."""
    n, channels, _, _ = x.shape
    out_channels, _, kh, kw = w.shape
    out_h, out_w = offset.shape[2:]
    strides = [int(s) for s in call.attr("strides", [1, 1])]
    dilations = [int(d) for d in call.attr("dilations", [1, 1])]
    pads = [int(p) for p in call.attr("pads", [0, 0, 0, 0])]
    groups = int(call.attr("group", 1))
    offset_groups = int(call.attr("offset_group", 1))
    taps = kh * kw
    off = offset.reshape(n, offset_groups, taps, 2, out_h, out_w)
    tap_y = (jnp.arange(taps) // kw * dilations[0]).reshape(1, 1, taps, 1, 1)
    tap_x = (jnp.arange(taps) % kw * dilations[1]).reshape(1, 1, taps, 1, 1)
    row = (jnp.arange(out_h) * strides[0] - pads[0]).reshape(1, 1, 1, out_h, 1)
    col = (jnp.arange(out_w) * strides[1] - pads[1]).reshape(1, 1, 1, 1, out_w)
    y = (row + tap_y).astype(x.dtype) + off[:, :, :, 0]
    xs = (col + tap_x).astype(x.dtype) + off[:, :, :, 1]
    grouped = x.reshape(n, offset_groups, channels // offset_groups, *x.shape[2:])
    sampled = _bilinear(grouped, y, xs)  # (N, G, taps, oH, oW, C/G)
    if mask is not None:
        sampled = sampled * mask.reshape(n, offset_groups, taps, out_h, out_w)[..., None]
    sampled = jnp.moveaxis(sampled, -1, 2).reshape(n, channels, taps, out_h, out_w)
    sampled = sampled.reshape(n, groups, channels // groups, taps, out_h, out_w)
    weights = w.reshape(groups, out_channels // groups, channels // groups, taps)
    out = jnp.einsum("ngckhw,gock->ngohw", sampled, weights, precision=current().precision)
    out = out.reshape(n, out_channels, out_h, out_w)
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out
