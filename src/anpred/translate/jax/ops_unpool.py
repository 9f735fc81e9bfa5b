"""LpPool and MaxUnpool jax translators.

jax has neither kernel: LpPool is ``(sum |x|^p)^(1/p)`` with the window sums from
``lax.reduce_window`` over the zero-padded ``|x|^p`` (the geometry of the other pools,
:mod:`anpred.translate.jax.ops_nn`); MaxUnpool scatters each value to its flat index
(MaxPool's Indices output) in a zero tensor with ``.at[].set``.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
from jax import lax

from anpred.translate.jax.ops_nn import _window_geometry
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import static_ints
from anpred.translate.registry import NodeCall


@register("LpPool")
def lp_pool(call: NodeCall, x: Any) -> Any:
    """ONNX LpPool (pads, strides, dilations, ceil_mode; zero pads count as 0)."""
    kernel, strides, dilations, _, total = _window_geometry(call, x)
    p = float(call.attr("p", 2))
    sums = lax.reduce_window(
        jnp.abs(x) ** p,
        jnp.asarray(0, dtype=x.dtype),
        lax.add,
        window_dimensions=(1, 1, *kernel),
        window_strides=(1, 1, *strides),
        padding=((0, 0), (0, 0), *total),
        window_dilation=(1, 1, *dilations),
    )
    return sums ** (1.0 / p)


@register("MaxUnpool")
def max_unpool(call: NodeCall, x: Any, indices: Any, output_shape: Any = None) -> Any:
    """ONNX MaxUnpool: the output shape is the static ``output_shape`` input when given,
    else ``(in - 1) * stride + kernel - pads``; ONNX's indices count over the whole tensor.
    """
    shape = static_ints(call, 2, output_shape, "output_shape")
    if shape is None:
        nd = x.ndim - 2
        kernel = [int(k) for k in call.attr("kernel_shape")]
        strides = [int(s) for s in call.attr("strides", [1] * nd)]
        pads = [int(p) for p in call.attr("pads", [0] * (2 * nd))]
        shape = list(x.shape[:2]) + [
            (n - 1) * s + k - pads[i] - pads[i + nd]
            for i, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel, strict=True))
        ]
    flat = jnp.zeros(math.prod(shape), dtype=x.dtype)
    flat = flat.at[indices.reshape(-1).astype(jnp.int32)].set(x.reshape(-1), mode="drop")
    return flat.reshape(shape)
