"""Shape-manipulation torch translators (Concat, Split, Slice, Gather, Reshape, Pad ...).

Static inputs (shapes, axes, starts, sizes, pads) come from ``call.const``; a run-time
value is read back from its tensor, which only eager execution allows.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register
from anpred.translate.torch.adapter import run_float
from anpred.translate.torch.windows import torch_pad

_LIB = "torch"

Tensor = torch.Tensor


def _ints(call: NodeCall, index: int, value: Tensor | None) -> list[int] | None:
    """Input ``index`` as a list of ints: its static value, else the tensor's, else ``None``."""
    static = call.const(index)
    if static is not None:
        return [int(v) for v in np.asarray(static).reshape(-1)]
    if value is not None:
        return [int(v) for v in value.reshape(-1).tolist()]
    return None


def _axes(call: NodeCall, index: int, value: Tensor | None) -> list[int] | None:
    """Axes given as input ``index`` (opset 13+) or as the ``axes`` attribute (before)."""
    axes = _ints(call, index, value)
    if axes is None and call.attr("axes") is not None:
        axes = [int(a) for a in call.attr("axes")]
    return axes


@register(_LIB, "Concat")
def concat(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Concat along ``axis``."""
    return torch.cat(inputs, dim=int(call.attr("axis")))


@register(_LIB, "Split")
def split(call: NodeCall, x: Tensor, sizes: Tensor | None = None) -> tuple[Tensor, ...]:
    """ONNX Split: sizes as input (13+) or attribute, else equal parts (last one smaller)."""
    axis = int(call.attr("axis", 0)) % x.ndim
    parts = _ints(call, 1, sizes) or call.attr("split")
    if not parts:
        count = int(call.attr("num_outputs", len(call.output_shapes)))
        chunk = math.ceil(x.shape[axis] / count)
        parts = [chunk] * (count - 1) + [x.shape[axis] - chunk * (count - 1)]
    return tuple(torch.split(x, [int(p) for p in parts], dim=axis))


def _slice_axis(x: Tensor, axis: int, start: int, end: int, step: int) -> Tensor:
    """Slice one axis with ONNX clamping rules; negative steps go through ``torch.flip``."""
    n = x.shape[axis]
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    index = [slice(None)] * x.ndim
    if step > 0:
        index[axis] = slice(min(max(start, 0), n), min(max(end, 0), n), step)
        return x[tuple(index)]
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    count = max(0, math.ceil((start - end) / -step))
    first = n - 1 - start
    index[axis] = slice(first, first + (count - 1) * -step + 1 if count else first, -step)
    return torch.flip(x, dims=(axis,))[tuple(index)]


@register(_LIB, "Slice")
def slice_(
    call: NodeCall,
    x: Tensor,
    starts: Tensor | None = None,
    ends: Tensor | None = None,
    axes: Tensor | None = None,
    steps: Tensor | None = None,
) -> Tensor:
    """ONNX Slice: starts/ends/axes/steps as inputs (10+) or attributes; any sign, any size."""
    if call.opset < 10:
        begin, stop = list(call.attr("starts")), list(call.attr("ends"))
        chosen = list(call.attr("axes", range(len(begin))))
        step_values = [1] * len(begin)
    else:
        begin, stop = _ints(call, 1, starts) or [], _ints(call, 2, ends) or []
        chosen = _ints(call, 3, axes) or list(range(len(begin)))
        step_values = _ints(call, 4, steps) or [1] * len(begin)
    for axis, start, end, step in zip(chosen, begin, stop, step_values, strict=True):
        x = _slice_axis(x, axis % x.ndim, start, end, step)
    return x


@register(_LIB, "Gather")
def gather(call: NodeCall, x: Tensor, indices: Tensor) -> Tensor:
    """ONNX Gather along ``axis``: indices of any rank (scalar drops the axis), may be < 0."""
    axis = int(call.attr("axis", 0)) % x.ndim
    indices = indices.to(torch.int64)
    indices = torch.where(indices < 0, indices + x.shape[axis], indices)
    picked = torch.index_select(x, axis, indices.reshape(-1))
    return picked.reshape((*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :]))


@register(_LIB, "Reshape")
def reshape(call: NodeCall, x: Tensor, shape: Tensor) -> Tensor:
    """ONNX Reshape: 0 copies the input dimension (unless ``allowzero``), -1 is inferred."""
    target = _ints(call, 1, shape) or []
    if not call.attr("allowzero", 0):
        target = [x.shape[i] if d == 0 else d for i, d in enumerate(target)]
    return torch.reshape(x, target)


@register(_LIB, "Transpose")
def transpose(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Transpose (default: reverse the axes)."""
    perm = call.attr("perm") or list(reversed(range(x.ndim)))
    return torch.permute(x, [int(p) for p in perm])


@register(_LIB, "Flatten")
def flatten(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Flatten to 2-D at ``axis`` (default 1, may be negative)."""
    axis = int(call.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    return torch.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


@register(_LIB, "Squeeze")
def squeeze(call: NodeCall, x: Tensor, axes: Tensor | None = None) -> Tensor:
    """ONNX Squeeze: given axes (input 13+, attribute before), else every size-1 axis."""
    chosen = _axes(call, 1, axes)
    if not chosen:
        return torch.squeeze(x)
    return torch.squeeze(x, dim=tuple(a % x.ndim for a in chosen))


@register(_LIB, "Unsqueeze")
def unsqueeze(call: NodeCall, x: Tensor, axes: Tensor | None = None) -> Tensor:
    """ONNX Unsqueeze: axes (input 13+, attribute before) index the output."""
    chosen = _axes(call, 1, axes) or []
    rank = x.ndim + len(chosen)
    for axis in sorted(a % rank for a in chosen):
        x = torch.unsqueeze(x, axis)
    return x


@register(_LIB, "Expand")
def expand(call: NodeCall, x: Tensor, shape: Tensor) -> Tensor:
    """ONNX Expand: broadcast ``x`` and ``shape`` against each other (either may be larger)."""
    target = np.broadcast_shapes(tuple(x.shape), tuple(_ints(call, 1, shape) or []))
    return x.expand(*target)


@register(_LIB, "Tile")
def tile(call: NodeCall, x: Tensor, repeats: Tensor) -> Tensor:
    """ONNX Tile."""
    return torch.tile(x, tuple(_ints(call, 1, repeats) or []))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@register(_LIB, "Pad")
def pad(
    call: NodeCall,
    x: Tensor,
    pads: Tensor | None = None,
    value: Tensor | None = None,
    axes: Tensor | None = None,
) -> Tensor:
    """ONNX Pad: pads (input 11+, attribute before; negative pads crop), value, axes (18+)."""
    mode = _PAD_MODES[call.attr("mode", "constant")]
    amounts = _ints(call, 1, pads) if call.opset >= 11 else list(call.attr("pads"))
    chosen = _ints(call, 3, axes) or list(range(x.ndim))
    begin, end = [0] * x.ndim, [0] * x.ndim
    for i, axis in enumerate(chosen):
        begin[axis % x.ndim] = amounts[i]
        end[axis % x.ndim] = amounts[i + len(chosen)]
    first = next((i for i in range(x.ndim) if begin[i] or end[i]), x.ndim)
    if first == x.ndim:
        return x
    if call.opset < 11:
        fill = float(call.attr("value", 0.0))
    else:
        static = call.const(2)
        fill = float(static) if static is not None else (0.0 if value is None else value.item())
    order = torch_pad(begin[first:], end[first:])
    if mode == "constant":
        return F.pad(x, order, mode="constant", value=fill)
    return F.pad(x, order, mode=mode)


@register(_LIB, "ConstantOfShape")
def constant_of_shape(call: NodeCall, shape: Tensor) -> Tensor:
    """ONNX ConstantOfShape (value attribute, default float 0)."""
    value = call.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    dtype = torch.from_numpy(value.reshape(-1)[:1].copy()).dtype
    return torch.full(
        _ints(call, 0, shape) or [], value.reshape(-1)[0].item(), dtype=run_float(dtype)
    )


@register(_LIB, "Range")
def range_(call: NodeCall, start: Tensor, limit: Tensor, delta: Tensor) -> Tensor:
    """ONNX Range ``start, start + delta, ...`` up to ``limit`` (exclusive)."""
    return torch.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)
