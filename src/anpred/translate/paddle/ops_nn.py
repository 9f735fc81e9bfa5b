"""Convolution, pooling and normalization, with ``paddle.nn.functional`` (NCHW).

Padding is resolved statically to explicit (begin, end) pairs per spatial axis, so
``auto_pad`` SAME_UPPER / SAME_LOWER / VALID and asymmetric ``pads`` all reach paddle as
an explicit padding list (``[top, bottom, left, right]`` for 2-D).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import paddle
import paddle.nn.functional as F

from anpred.errors import UsageError
from anpred.translate.paddle.ops_norm import batch_norm_training
from anpred.translate.registry import NodeCall, register

Tensor = Any

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_ADAPTIVE_AVG_POOL = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}
_ADAPTIVE_MAX_POOL = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}


def _spatial_shape(call: NodeCall, x: Tensor) -> list[int]:
    shape = call.input_shapes[0] if call.input_shapes else None
    return list(shape[2:]) if shape is not None else list(x.shape[2:])


def _pads(
    call: NodeCall,
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[tuple[int, int]]:
    """Return the (begin, end) padding of every spatial axis, ``auto_pad`` resolved."""
    rank = len(spatial)
    auto_pad = call.attr("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = list(call.attr("pads", [0] * 2 * rank))
        return [(int(pads[i]), int(pads[i + rank])) for i in range(rank)]
    if auto_pad == "VALID":
        return [(0, 0)] * rank
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise UsageError(f"node {call.name}: unknown auto_pad {auto_pad!r}")
    result = []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        out = math.ceil(size / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        result.append((small, large) if auto_pad == "SAME_UPPER" else (large, small))
    return result


def _padding_arg(pads: Sequence[tuple[int, int]]) -> list[int]:
    """Paddle's padding list: one value per axis when symmetric, else begin/end pairs."""
    if all(begin == end for begin, end in pads):
        return [begin for begin, _ in pads]
    return [value for pair in pads for value in pair]


def _window(call: NodeCall, x: Tensor, kernel: Sequence[int]) -> dict[str, Any]:
    rank = len(kernel)
    strides = list(call.attr("strides", [1] * rank))
    dilations = list(call.attr("dilations", [1] * rank))
    pads = _pads(call, _spatial_shape(call, x), kernel, strides, dilations)
    return {"strides": strides, "dilations": dilations, "pads": pads}


@register("paddle", "Conv")
def conv(call: NodeCall, x: Tensor, w: Tensor, b: Tensor = None) -> Tensor:
    """ONNX Conv: 1-D/2-D/3-D, groups (incl. depthwise), strides, dilations, any padding."""
    kernel = list(call.attr("kernel_shape", list(w.shape[2:])))
    rank = len(kernel)
    if rank not in _CONV:
        raise UsageError(f"node {call.name}: paddle has no {rank}-D convolution")
    window = _window(call, x, kernel)
    return _CONV[rank](
        x,
        w,
        bias=b,
        stride=window["strides"],
        padding=_padding_arg(window["pads"]),
        dilation=window["dilations"],
        groups=int(call.attr("group", 1)),
    )


def _pool_window(call: NodeCall, x: Tensor) -> tuple[int, list[int], dict[str, Any]]:
    kernel = list(call.attr("kernel_shape"))
    rank = len(kernel)
    if rank not in _MAX_POOL:
        raise UsageError(f"node {call.name}: paddle has no {rank}-D pooling")
    return rank, kernel, _window(call, x, kernel)


def _pool_sizes(
    call: NodeCall, x: Tensor, kernel: Sequence[int], window: dict[str, Any]
) -> list[tuple[int, int]]:
    """Return ONNX's output size and the floor-mode size of every spatial axis.

    Under ``ceil_mode`` ONNX (like torch) drops a last window that would start in the end
    padding; the dilated kernel spans ``(k - 1) * d + 1`` elements.
    """
    ceil_mode = bool(call.attr("ceil_mode", 0))
    sizes = []
    axes = zip(
        _spatial_shape(call, x),
        kernel,
        window["strides"],
        window["dilations"],
        window["pads"],
        strict=True,
    )
    for size, k, s, d, (begin, end) in axes:
        span = size + begin + end - ((k - 1) * d + 1)
        out = -(-span // s) + 1 if ceil_mode else span // s + 1
        if ceil_mode and (out - 1) * s >= size + begin:
            out -= 1
        sizes.append((out, span // s + 1))
    return sizes


def _pad_explicit(x: Tensor, pads: Sequence[tuple[int, int]], value: float) -> Tensor:
    """Pad the spatial axes of ``x`` (NC...) by ``pads`` with the constant ``value``."""
    full = [0, 0, 0, 0] + [p for pair in pads for p in pair]
    return F.pad(x, full, mode="constant", value=value)


def _pool(
    call: NodeCall, x: Tensor, pool: Any, pad_value: float | None = None, **kwargs: Any
) -> Tensor:
    """Run ``pool`` with ONNX's output size, also under ``ceil_mode``.

    ONNX (like torch) drops a last window that would start in the end padding; paddle
    keeps it (measured: 9 rows, kernel 2, stride 2, pads 1+1 give 5 rows in ONNX, 6 in
    paddle). When that happens the extra, all-padding output row is sliced off; when
    ceiling adds nothing, paddle runs without ``ceil_mode``.

    With ``pad_value`` the pads are applied to ``x`` explicitly (``F.pad``) and paddle
    pools without padding, so the padded elements count as ordinary elements.

    Raises:
        UsageError: For dilations other than 1 (paddle's pooling has none).
    """
    rank, kernel, window = _pool_window(call, x)
    if any(d != 1 for d in window["dilations"]):
        raise UsageError(f"node {call.name}: paddle pooling has no dilations")
    sizes = _pool_sizes(call, x, kernel, window)
    pads = window["pads"]
    if pad_value is not None and any(p for pair in pads for p in pair):
        x = _pad_explicit(x, pads, pad_value)
        pads = [(0, 0)] * rank
    ceil_mode = any(out != floor_out for out, floor_out in sizes)
    result = pool[rank](
        x,
        kernel,
        stride=window["strides"],
        padding=_padding_arg(pads),
        ceil_mode=ceil_mode,
        **kwargs,
    )
    if list(result.shape[2:]) != [out for out, _ in sizes]:
        result = result[(slice(None), slice(None), *(slice(0, out) for out, _ in sizes))]
    return result


def _dilated_geometry(call: NodeCall, x: Tensor) -> dict[str, Any]:
    """Geometry of a dilated pooling (paddle's pooling has no dilations).

    Returns :func:`_window`'s entries plus ``kernel``, ``sizes`` (ONNX output sizes) and
    ``needed``: the (begin, end) pads that the last window's span reaches.
    """
    _, kernel, window = _pool_window(call, x)
    sizes = [out for out, _ in _pool_sizes(call, x, kernel, window)]
    needed = []
    axes = zip(_spatial_shape(call, x), kernel, window["strides"], window["dilations"],
               window["pads"], sizes, strict=True)  # fmt: skip
    for size, k, s, d, (begin, _), out in axes:
        span = (out - 1) * s + (k - 1) * d + 1
        needed.append((begin, max(0, span - size - begin)))
    return {**window, "kernel": kernel, "sizes": sizes, "needed": needed}


def _taps(padded: Tensor, geometry: dict[str, Any]) -> list[Tensor]:
    """One strided slice per kernel tap of a padded tensor (``paddle.strided_slice``).

    Tap ``(o_1, ..., o_r)`` reads, along axis ``i``, elements ``o_i * d_i + j * s_i`` for
    output index ``j``.
    """
    strides, dilations, sizes = geometry["strides"], geometry["dilations"], geometry["sizes"]
    axes = list(range(2, len(sizes) + 2))
    taps = []
    for offsets in itertools.product(*(range(k) for k in geometry["kernel"])):
        starts = [o * d for o, d in zip(offsets, dilations, strict=True)]
        ends = [a + (n - 1) * s + 1 for a, n, s in zip(starts, sizes, strides, strict=True)]
        taps.append(paddle.strided_slice(padded, axes, starts, ends, strides))
    return taps


def _dilated_max_pool(call: NodeCall, x: Tensor) -> Tensor:
    """MaxPool with dilations: the maximum of the taps of the ``-inf``-padded input (exact)."""
    geometry = _dilated_geometry(call, x)
    return functools.reduce(
        paddle.maximum, _taps(_pad_explicit(x, geometry["needed"], float("-inf")), geometry)
    )


def _dilated_average_pool(call: NodeCall, x: Tensor) -> Tensor:
    """AveragePool with dilations: sum of the zero-padded input's taps / a mask's.

    The mask marks what ONNX counts: the input, plus the declared pads under
    ``count_include_pad`` (never the cells a ``ceil_mode`` window reaches beyond them).
    """
    geometry = _dilated_geometry(call, x)
    needed = geometry["needed"]
    mask = paddle.ones([1, 1, *_spatial_shape(call, x)], dtype=x.dtype)
    if call.attr("count_include_pad", 0):
        ends = [(min(e, n), n) for (_, e), (_, n) in zip(geometry["pads"], needed, strict=True)]
        declared = [(b, e) for (b, _), (e, _) in zip(needed, ends, strict=True)]
        mask = _pad_explicit(mask, declared, 1.0)
        mask = _pad_explicit(mask, [(0, n - e) for e, n in ends], 0.0)
    else:
        mask = _pad_explicit(mask, needed, 0.0)
    sums = functools.reduce(paddle.add, _taps(_pad_explicit(x, needed, 0.0), geometry))
    return sums / functools.reduce(paddle.add, _taps(mask, geometry))


@register("paddle", "MaxPool")
def max_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX MaxPool (kernel, strides, dilations, pads incl. asymmetric, auto_pad, ceil_mode).

    Without dilations paddle's ``max_pool{1,2,3}d`` runs; with them (paddle's pooling has
    none), :func:`_dilated_max_pool`. The ``Indices`` output: :func:`_max_pool_with_indices`.
    """
    if len(call.output_shapes) > 1:
        return _max_pool_with_indices(call, x)
    if any(d != 1 for d in call.attr("dilations", [])):
        return _dilated_max_pool(call, x)
    return _pool(call, x, _MAX_POOL)


def _max_pool_with_indices(call: NodeCall, x: Tensor) -> list[Tensor]:
    """MaxPool and Indices: paddle's ``max_pool{1,2,3}d(return_mask=True)``.

    Paddle's mask is the flat index into each unpadded (n, c) plane; integer paddle ops
    move it to ONNX's flat index over the whole tensor (column-major within the plane with
    ``storage_order`` 1).

    Raises:
        UsageError: With dilations (paddle's pooling has none, and no other paddle op
            returns the argmax).
    """
    rank, kernel, window = _pool_window(call, x)
    if any(d != 1 for d in window["dilations"]):
        raise UsageError(
            f"node {call.name}: MaxPool Indices need paddle's max_pool(return_mask=True), "
            "which has no dilations"
        )
    sizes = _pool_sizes(call, x, kernel, window)
    y, mask = _MAX_POOL[rank](
        x,
        kernel,
        stride=window["strides"],
        padding=_padding_arg(window["pads"]),
        ceil_mode=any(out != floor_out for out, floor_out in sizes),
        return_mask=True,
    )
    if list(y.shape[2:]) != [out for out, _ in sizes]:
        keep = (slice(None), slice(None), *(slice(0, out) for out, _ in sizes))
        y, mask = y[keep], mask[keep]
    n, c, *spatial = (int(d) for d in x.shape)
    mask = paddle.cast(mask, "int64")
    if call.attr("storage_order", 0):
        if rank != 2:
            raise UsageError(f"node {call.name}: MaxPool storage_order 1 beyond 2-D")
        height, width = spatial
        mask = (mask % width) * height + mask // width
    plane = math.prod(spatial)
    base = paddle.arange(n * c, dtype="int64").reshape([n, c, *([1] * rank)]) * plane
    return [y, mask + base]


@register("paddle", "AveragePool")
def average_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX AveragePool (count_include_pad, ceil_mode, pads incl. asymmetric, auto_pad).

    With ``count_include_pad`` the zero padding is applied explicitly and paddle averages
    with ``exclusive=True`` over the padded tensor: every window counts its padded zeros,
    and a ``ceil_mode`` window running past the padding counts only what it covers, as
    ONNX does. (Paddle's own ``exclusive=False`` divides wrongly under asymmetric pads.)
    Dilated windows (paddle's pooling has no dilations): :func:`_dilated_average_pool`.
    """
    if any(d != 1 for d in call.attr("dilations", [])):
        return _dilated_average_pool(call, x)
    if call.attr("count_include_pad", 0):
        return _pool(call, x, _AVG_POOL, pad_value=0.0, exclusive=True)
    return _pool(call, x, _AVG_POOL, exclusive=True)


@register("paddle", "GlobalAveragePool")
def global_average_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX GlobalAveragePool, as paddle's adaptive average pooling to size 1."""
    rank = len(x.shape) - 2
    return _ADAPTIVE_AVG_POOL[rank](x, 1)


@register("paddle", "GlobalMaxPool")
def global_max_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX GlobalMaxPool, as paddle's adaptive max pooling to size 1."""
    rank = len(x.shape) - 2
    return _ADAPTIVE_MAX_POOL[rank](x, 1)


@register("paddle", "BatchNormalization")
def batch_normalization(
    call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor
) -> Tensor | list[Tensor]:
    """ONNX BatchNormalization at inference (running statistics, ``epsilon``); with
    ``training_mode=1`` :func:`~anpred.translate.paddle.ops_norm.batch_norm_training`.
    """
    if call.attr("training_mode", 0):
        return batch_norm_training(call, x, scale, bias, mean, var)
    return F.batch_norm(
        x,
        mean,
        var,
        weight=scale,
        bias=bias,
        training=False,
        epsilon=float(call.attr("epsilon", 1e-5)),
        use_global_stats=True,
    )


#: Largest epsilon paddle's layer_norm kernel accepts (it rejects larger ones).
_LAYER_NORM_MAX_EPSILON = 1e-3


@register("paddle", "LayerNormalization", since=17)
def layer_normalization(
    call: NodeCall, x: Tensor, scale: Tensor, bias: Tensor = None
) -> Tensor | list[Tensor]:
    """ONNX LayerNormalization over the axes from ``axis`` (default -1) on.

    Y comes from ``F.layer_norm``. Its kernel rejects ``begin_norm_axis`` 0, so ``axis`` 0
    normalises a ``[1, size]`` view (the same reduction); it rejects ``epsilon > 1e-3``, so
    such a node is composed from ``paddle.mean``, ``paddle.var`` and ``paddle.rsqrt``. The
    optional Mean and InvStdDev outputs (shape of x with the normalised axes kept as 1) are
    computed, only when the node has them, with ``paddle.mean`` / ``paddle.var`` (biased) /
    ``paddle.rsqrt``.
    """
    shape = list(x.shape)
    axis = int(call.attr("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    normalized = shape[axis:]
    size = math.prod(normalized)
    epsilon = float(call.attr("epsilon", 1e-5))
    axes = list(range(axis, len(shape)))

    def flat(param: Tensor) -> Tensor | None:
        if param is None:
            return None
        if math.prod(param.shape) != size:
            param = paddle.expand(param, normalized)
        return paddle.reshape(param, [size])

    def stats() -> tuple[Tensor, Tensor]:
        mean = paddle.mean(x, axis=axes, keepdim=True)
        inv_std = paddle.rsqrt(paddle.var(x, axis=axes, unbiased=False, keepdim=True) + epsilon)
        return mean, inv_std

    if epsilon > _LAYER_NORM_MAX_EPSILON:
        mean, inv_std = stats()
        y = (x - mean) * inv_std
        y = y * (scale if scale.shape == normalized else paddle.expand(scale, normalized))
        if bias is not None:
            y = y + bias
    else:
        source = paddle.reshape(x, [1, size]) if axis == 0 else x
        y = F.layer_norm(source, [size] if axis == 0 else normalized, weight=flat(scale),
                         bias=flat(bias), epsilon=epsilon)  # fmt: skip
        if axis == 0:
            y = paddle.reshape(y, shape)
        if len(call.output_shapes) == 1:
            return y
        mean, inv_std = stats()
    return [y, mean, inv_std][: len(call.output_shapes)]
