"""Pooling torch translators (NCHW): MaxPool, AveragePool, LpPool and the global pools.

When the ONNX window geometry fits a torch pooling kernel (symmetric pads of at most half
the window) the kernel is called directly, ``ceil_mode`` included. Otherwise the input is
padded explicitly, up to the extent the ONNX output size needs, and pooled without padding;
for averages the divisor is then pooled from a mask that marks what ONNX counts.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.windows import pool_output_size, resolve_pads, torch_pad

_LIB = "torch"

Tensor = torch.Tensor

_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_ADAPTIVE_AVG = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}


class _Window:
    """ONNX pooling geometry of one node for one input shape."""

    def __init__(self, call: NodeCall, spatial: list[int]) -> None:
        nd = len(spatial)
        self.kernel = list(call.attr("kernel_shape"))
        self.strides = list(call.attr("strides", [1] * nd))
        self.dilations = list(call.attr("dilations", [1] * nd))
        self.ceil_mode = bool(call.attr("ceil_mode", 0))
        self.begin, self.end = resolve_pads(
            call, spatial, self.kernel, self.strides, self.dilations
        )
        self.spatial = spatial
        self.out = [
            pool_output_size(n, b, e, k, s, d, self.ceil_mode)
            for n, b, e, k, s, d in zip(
                spatial, self.begin, self.end, self.kernel, self.strides, self.dilations,
                strict=True,
            )
        ]  # fmt: skip

    @property
    def native(self) -> bool:
        """Whether torch's own padding reproduces the ONNX window exactly."""
        return self.begin == self.end and all(
            2 * p <= (k - 1) * d + 1
            for p, k, d in zip(self.begin, self.kernel, self.dilations, strict=True)
        )

    def extended_end(self) -> list[int]:
        """End pads that make a floor-mode pool produce exactly the ONNX output size."""
        return [
            (o - 1) * s + (k - 1) * d + 1 - n - b
            for o, s, k, d, n, b in zip(
                self.out, self.strides, self.kernel, self.dilations, self.spatial, self.begin,
                strict=True,
            )
        ]  # fmt: skip


@register(_LIB, "MaxPool")
def max_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX MaxPool: kernel, strides, dilations, pads / ``auto_pad``, ``ceil_mode``.

    The Indices output comes from torch's ``return_indices`` (a flat index into each
    unpadded (n, c) plane) where torch's own padding reproduces the window, moved to ONNX's
    flat index over the whole tensor (row-major, or column-major with ``storage_order`` 1).
    """
    nd = x.ndim - 2
    win = _Window(call, list(x.shape[2:]))
    pool = _MAX_POOL[nd]
    if len(call.output_shapes) > 1:
        if not win.native:
            raise NotImplementedError(
                "MaxPool's Indices output with pads torch's kernel does not take"
            )
        y, index = pool(x, win.kernel, win.strides, win.begin, win.dilations, win.ceil_mode,
                        return_indices=True)  # fmt: skip
        return [y, _onnx_indices(call, x, index)]
    if win.native:
        return pool(x, win.kernel, win.strides, win.begin, win.dilations, win.ceil_mode)
    padded = F.pad(x, torch_pad(win.begin, win.extended_end()), value=float("-inf"))
    return pool(padded, win.kernel, win.strides, 0, win.dilations)


@register(_LIB, "AveragePool")
def average_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX AveragePool: kernel, strides, pads / ``auto_pad``, ceil mode, ``count_include_pad``.

    With ``count_include_pad`` the divisor counts the declared pads but never the cells a
    ceil-mode window reaches beyond them (as onnxruntime and torch do). torch's average
    pools have no dilation: dilated windows are summed from strided views
    (:func:`_window_sum`), for the values and for the mask of counted cells alike.
    """
    nd = x.ndim - 2
    win = _Window(call, list(x.shape[2:]))
    include_pad = bool(call.attr("count_include_pad", 0))
    dilated = win.dilations != [1] * nd
    pool = _AVG_POOL[nd] if not dilated else lambda t, *_: _window_sum(t, win)
    if win.native and not dilated:
        return pool(x, win.kernel, win.strides, win.begin, win.ceil_mode, include_pad)
    end = win.extended_end()
    extra = [e - d for e, d in zip(end, win.end, strict=True)]
    sums = pool(F.pad(x, torch_pad(win.begin, end)), win.kernel, win.strides)
    mask = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    if include_pad:
        mask = F.pad(mask, torch_pad(win.begin, win.end), value=1.0)
        mask = F.pad(mask, torch_pad([0] * nd, extra))
    else:
        mask = F.pad(mask, torch_pad(win.begin, end))
    counts = pool(mask, win.kernel, win.strides)
    return sums / counts


def _onnx_indices(call: NodeCall, x: Tensor, index: Tensor) -> Tensor:
    """ONNX MaxPool Indices from torch's per-plane flat indices (integer torch ops)."""
    n, c, *spatial = x.shape
    plane = 1
    for size in spatial:
        plane *= size
    if call.attr("storage_order", 0):
        if len(spatial) != 2:
            raise NotImplementedError("MaxPool Indices with storage_order 1 beyond 2-D")
        height, width = spatial
        index = torch.remainder(index, width) * height + torch.div(
            index, width, rounding_mode="floor"
        )
    base = torch.arange(n * c, dtype=index.dtype).reshape(n, c, *([1] * len(spatial)))
    return index + base * plane


def _window_sum(t: Tensor, win: _Window) -> Tensor:
    """Sum of every (dilated) window of an explicitly padded tensor, unpadded sweep.

    One strided view per kernel offset, added up: ``prod(kernel)`` slices and additions.
    """
    total = None
    for offsets in itertools.product(*(range(k) for k in win.kernel)):
        index = [slice(None), slice(None)]
        for o, d, n, s in zip(offsets, win.dilations, win.out, win.strides, strict=True):
            index.append(slice(o * d, o * d + (n - 1) * s + 1, s))
        view = t[tuple(index)]
        total = view if total is None else total + view
    assert total is not None
    return total


@register(_LIB, "GlobalAveragePool")
def global_average_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX GlobalAveragePool: the mean over all spatial axes, kept as size-1 axes."""
    return _ADAPTIVE_AVG[x.ndim - 2](x, 1)


@register(_LIB, "GlobalMaxPool")
def global_max_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX GlobalMaxPool: the maximum over all spatial axes, kept as size-1 axes."""
    return torch.amax(x, dim=tuple(range(2, x.ndim)), keepdim=True)


@register(_LIB, "LpPool")
def lp_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX LpPool ``(sum |x|^p)^(1/p)`` over each window (zero pads count as 0).

    ``F.lp_pool*d`` takes no pads or dilations and clamps negative sums with ReLU: the
    windows are summed from strided views of the padded ``|x|^p`` instead (as dilated
    average pools are).
    """
    win = _Window(call, list(x.shape[2:]))
    p = float(call.attr("p", 2))
    powered = F.pad(torch.pow(torch.abs(x), p), torch_pad(win.begin, win.extended_end()))
    return torch.pow(_window_sum(powered, win), 1.0 / p)


@register(_LIB, "GlobalLpPool")
def global_lp_pool(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX GlobalLpPool: the p-norm over all spatial axes, kept as size-1 axes."""
    p = float(call.attr("p", 2))
    dims = tuple(range(2, x.ndim))
    return torch.linalg.vector_norm(x, ord=p, dim=dims, keepdim=True)


@register(_LIB, "MaxUnpool")
def max_unpool(
    call: NodeCall, x: Tensor, indices: Tensor, output_shape: Tensor | None = None
) -> Tensor:
    """ONNX MaxUnpool: each value to its flat index (MaxPool's Indices) in a zero tensor.

    The output shape is the ``output_shape`` input when given, else ``(in - 1) * stride +
    kernel - pads``. ``Tensor.scatter`` on the flattened output: ONNX's indices count over
    the whole tensor, ``F.max_unpool*d``'s per (n, c) plane.
    """
    static = call.const(2)
    if static is not None or output_shape is not None:
        shape = [int(v) for v in (static if static is not None else output_shape.tolist())]
    else:
        nd = x.ndim - 2
        kernel = list(call.attr("kernel_shape"))
        strides = list(call.attr("strides", [1] * nd))
        pads = list(call.attr("pads", [0] * (2 * nd)))
        shape = list(x.shape[:2]) + [
            (n - 1) * s + k - pads[i] - pads[i + nd]
            for i, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel, strict=True))
        ]
    flat = torch.zeros(math.prod(shape), dtype=x.dtype)
    flat = flat.scatter(0, indices.reshape(-1).to(torch.int64), x.reshape(-1))
    return flat.reshape(shape)
