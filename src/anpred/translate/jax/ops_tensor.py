"""Shape-manipulation ONNX ops: Reshape, Transpose, Flatten, Squeeze, Unsqueeze, Expand, Tile.

Shapes, axes and repeats must be static (initializers or folded shape arithmetic): jax
programs have static shapes.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from anpred.translate.jax.numerics import index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.jax.static import axes_of, normalize_axes, static_ints
from anpred.translate.registry import NodeCall


@register("Reshape")
def reshape(call: NodeCall, x: Any, shape: Any) -> Any:
    """Reshape; ``0`` copies the input dimension (unless ``allowzero``), ``-1`` is inferred."""
    target = static_ints(call, 1, shape, "shape")
    if not call.attr("allowzero", 0):
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return jnp.reshape(x, target)


@register("Transpose")
def transpose(call: NodeCall, x: Any) -> Any:
    """Permute axes (default: reverse them)."""
    perm = call.attr("perm")
    return jnp.transpose(x, None if perm is None else [int(p) for p in perm])


@register("Flatten")
def flatten(call: NodeCall, x: Any) -> Any:
    """Reshape to 2-D, splitting the axes at ``axis`` (default 1)."""
    axis = int(call.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return jnp.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@register("Squeeze")
def squeeze(call: NodeCall, x: Any, axes: Any = None) -> Any:
    """Drop the given size-1 axes (all size-1 axes when none are given)."""
    given = axes_of(call, 1, axes)
    if given is None:
        return jnp.squeeze(x)
    return jnp.squeeze(x, axis=tuple(normalize_axes(given, x.ndim)))


@register("Unsqueeze")
def unsqueeze(call: NodeCall, x: Any, axes: Any = None) -> Any:
    """Insert size-1 axes at the given positions of the output."""
    given = axes_of(call, 1, axes) or []
    positions = normalize_axes(given, x.ndim + len(given))
    return jnp.expand_dims(x, axis=tuple(sorted(positions)))


@register("Expand")
def expand(call: NodeCall, x: Any, shape: Any) -> Any:
    """Broadcast to ``shape`` (bidirectionally, as ONNX Expand does)."""
    target = static_ints(call, 1, shape, "shape")
    return jnp.broadcast_to(x, np.broadcast_shapes(tuple(x.shape), tuple(target)))


@register("Tile")
def tile(call: NodeCall, x: Any, repeats: Any) -> Any:
    """Repeat the tensor ``repeats[i]`` times along axis ``i``."""
    return jnp.tile(x, static_ints(call, 1, repeats, "repeats"))


@register("Shape")
def shape_of(call: NodeCall, x: Any) -> Any:
    """Shape as a NumPy array (usually folded at build time; jax shapes are static, so the
    shape arithmetic that follows is evaluated while tracing, see
    :mod:`anpred.translate.jax.registration`).
    """
    start = call.attr("start", 0)
    end = call.attr("end")
    return np.asarray(x.shape[start:end], dtype=index_dtype())


@register("Size")
def size_of(call: NodeCall, x: Any) -> Any:
    """Return the number of elements as a scalar tensor."""
    return np.asarray(math.prod(x.shape), dtype=index_dtype())
