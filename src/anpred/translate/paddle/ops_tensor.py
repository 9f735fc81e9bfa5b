"""Shape manipulation and tensor creation, with paddle's own operators.

Static operands (Reshape shape, Slice starts/ends/axes/steps, Split sizes, Squeeze /
Unsqueeze axes, Expand shape, Tile repeats, Pad pads) are read with ``call.const`` (or,
computed at run time, from the eager tensor: :mod:`anpred.translate.paddle.static_values`) and
resolved with plain Python / NumPy integer arithmetic; only paddle touches tensor data.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

from anpred.errors import UsageError
from anpred.translate.paddle.dtypes import numpy_float_dtype
from anpred.translate.paddle.static_values import ints, static_value
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _static(call: NodeCall, index: int, what: str, value: Any = None) -> np.ndarray:
    """Return (present) input ``index``'s static or eager value (:func:`static_value`)."""
    return static_value(call, index, what, value)


def _ints(value: Any) -> list[int]:
    return ints(value)


@register("paddle", "Concat")
def concat(call: NodeCall, *inputs: Tensor) -> Tensor:
    """ONNX Concat along ``axis``."""
    return paddle.concat(list(inputs), axis=int(call.attr("axis")))


def _split_sizes(call: NodeCall, dim: int, sizes: np.ndarray | None) -> list[int]:
    if sizes is not None and np.asarray(sizes).size:
        return _ints(sizes)
    count = int(call.attr("num_outputs", len(call.output_shapes)))
    chunk = math.ceil(dim / count)
    return [min(chunk, dim - i * chunk) for i in range(count)]


@register("paddle", "Split")
def split_attribute(call: NodeCall, x: Tensor) -> tuple[Tensor, ...]:
    """ONNX Split before opset 13 (``split`` attribute or equal parts)."""
    axis = int(call.attr("axis", 0))
    sizes = call.attr("split")
    sizes = None if sizes is None else np.asarray(sizes)
    return tuple(paddle.split(x, _split_sizes(call, int(x.shape[axis]), sizes), axis=axis))


@register("paddle", "Split", since=13)
def split(call: NodeCall, x: Tensor, sizes: Tensor = None) -> tuple[Tensor, ...]:
    """ONNX Split (opset 13+: sizes input; opset 18+: ``num_outputs``, last part smaller)."""
    axis = int(call.attr("axis", 0))
    static_sizes = _static(call, 1, "split sizes", sizes) if sizes is not None else None
    parts = _split_sizes(call, int(x.shape[axis]), static_sizes)
    return tuple(paddle.split(x, parts, axis=axis))


def _slice(
    x: Tensor, starts: list[int], ends: list[int], axes: list[int] | None, steps: list[int] | None
) -> Tensor:
    shape = list(x.shape)
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index: list[slice] = [slice(None)] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = axis + rank if axis < 0 else axis
        dim = shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            index[axis] = slice(start, end, step)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            index[axis] = slice(start, end if end >= 0 else None, step)
    return x[tuple(index)]


@register("paddle", "Slice")
def slice_attribute(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Slice before opset 10 (``starts`` / ``ends`` / ``axes`` attributes)."""
    axes = call.attr("axes")
    return _slice(
        x,
        _ints(call.attr("starts")),
        _ints(call.attr("ends")),
        None if axes is None else _ints(axes),
        None,
    )


@register("paddle", "Slice", since=10)
def slice_(
    call: NodeCall,
    x: Tensor,
    starts: Tensor,
    ends: Tensor,
    axes: Tensor = None,
    steps: Tensor = None,
) -> Tensor:
    """ONNX Slice (opset 10+: static starts/ends/axes/steps inputs, negative and huge ends)."""
    return _slice(
        x,
        _ints(_static(call, 1, "starts", starts)),
        _ints(_static(call, 2, "ends", ends)),
        None if axes is None else _ints(_static(call, 3, "axes", axes)),
        None if steps is None else _ints(_static(call, 4, "steps", steps)),
    )


@register("paddle", "Gather")
def gather(call: NodeCall, x: Tensor, indices: Tensor) -> Tensor:
    """ONNX Gather along ``axis`` (scalar, vector or N-D indices; negative indices)."""
    axis = int(call.attr("axis", 0))
    shape = list(x.shape)
    axis = axis + len(shape) if axis < 0 else axis
    dim = shape[axis]
    static = call.const(1)
    if static is not None:
        if (static < 0).any():
            indices = paddle.to_tensor(np.where(static < 0, static + dim, static))
    else:
        indices = paddle.where(indices < 0, indices + dim, indices)
    if len(indices.shape) <= 1:
        return paddle.gather(x, indices, axis=axis)
    flat = paddle.gather(x, paddle.reshape(indices, [-1]), axis=axis)
    return paddle.reshape(flat, shape[:axis] + list(indices.shape) + shape[axis + 1 :])


@register("paddle", "Reshape", since=5)
def reshape(call: NodeCall, x: Tensor, shape: Tensor) -> Tensor:
    """ONNX Reshape (0 copies the input dimension unless ``allowzero``; -1 is inferred)."""
    target = _ints(_static(call, 1, "shape", shape))
    if not call.attr("allowzero", 0):
        target = [int(x.shape[i]) if s == 0 else s for i, s in enumerate(target)]
    return paddle.reshape(x, target)


@register("paddle", "Transpose")
def transpose(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Transpose (``perm`` defaults to reversing the axes)."""
    perm = call.attr("perm")
    perm = list(range(len(x.shape)))[::-1] if perm is None else [int(p) for p in perm]
    return paddle.transpose(x, perm)


@register("paddle", "Flatten")
def flatten(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Flatten to 2-D at ``axis`` (default 1; 0 gives shape (1, N))."""
    shape = list(x.shape)
    axis = int(call.attr("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    return paddle.reshape(x, [math.prod(shape[:axis]), math.prod(shape[axis:])])


def _squeeze(x: Tensor, axes: list[int] | None) -> Tensor:
    return paddle.squeeze(x) if not axes else paddle.squeeze(x, axis=axes)


@register("paddle", "Squeeze")
def squeeze_attribute(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Squeeze before opset 13 (``axes`` attribute; all size-1 axes when absent)."""
    axes = call.attr("axes")
    return _squeeze(x, None if axes is None else _ints(axes))


@register("paddle", "Squeeze", since=13)
def squeeze(call: NodeCall, x: Tensor, axes: Tensor = None) -> Tensor:
    """ONNX Squeeze (opset 13+: optional static axes input)."""
    return _squeeze(x, None if axes is None else _ints(_static(call, 1, "axes", axes)))


def _unsqueeze(x: Tensor, axes: list[int]) -> Tensor:
    rank = len(x.shape) + len(axes)
    return paddle.unsqueeze(x, axis=sorted(a + rank if a < 0 else a for a in axes))


@register("paddle", "Unsqueeze")
def unsqueeze_attribute(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Unsqueeze before opset 13 (``axes`` attribute)."""
    return _unsqueeze(x, _ints(call.attr("axes")))


@register("paddle", "Unsqueeze", since=13)
def unsqueeze(call: NodeCall, x: Tensor, axes: Tensor) -> Tensor:
    """ONNX Unsqueeze (opset 13+: static axes input, negative axes allowed)."""
    return _unsqueeze(x, _ints(_static(call, 1, "axes", axes)))


@register("paddle", "Expand", since=8)
def expand(call: NodeCall, x: Tensor, shape: Tensor) -> Tensor:
    """ONNX Expand (bidirectional broadcast of ``x`` with the static ``shape``)."""
    target = np.broadcast_shapes(tuple(x.shape), tuple(_ints(_static(call, 1, "shape", shape))))
    return paddle.expand(x, list(target))


@register("paddle", "Tile", since=6)
def tile(call: NodeCall, x: Tensor, repeats: Tensor) -> Tensor:
    """ONNX Tile (static repeats)."""
    return paddle.tile(x, _ints(_static(call, 1, "repeats", repeats)))


def _pad(call: NodeCall, x: Tensor, pads: list[int], value: float, mode: str) -> Tensor:
    """Pad with full-rank ONNX ``pads``; negative pads crop afterwards."""
    rank = len(x.shape)
    pairs = [(pads[i], pads[i + rank]) for i in range(rank)]
    grow = [(max(b, 0), max(e, 0)) for b, e in pairs]
    if any(b or e for b, e in grow):
        if mode == "constant":
            flat = [v for pair in grow for v in pair]
            x = F.pad(x, flat, mode="constant", value=value)
        elif mode in ("reflect", "edge") and 3 <= rank <= 5 and not any(grow[0] + grow[1]):
            # paddle's spatial form: last axis first, (begin, end) per axis
            flat = [v for pair in reversed(grow[2:]) for v in pair]
            layout = {3: "NCL", 4: "NCHW", 5: "NCDHW"}[rank]
            paddle_mode = "reflect" if mode == "reflect" else "replicate"
            x = F.pad(x, flat, mode=paddle_mode, data_format=layout)
        else:
            raise UsageError(f"node {call.name}: Pad mode {mode!r} on these axes not translated")
    if any(b < 0 or e < 0 for b, e in pairs):
        shape = list(x.shape)
        index = tuple(slice(-min(b, 0), shape[i] + min(e, 0)) for i, (b, e) in enumerate(pairs))
        x = x[index]
    return x


@register("paddle", "Pad", since=2)
def pad_attribute(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Pad before opset 11 (``pads`` / ``value`` attributes)."""
    mode = call.attr("mode", "constant")
    return _pad(call, x, _ints(call.attr("pads")), float(call.attr("value", 0.0)), mode)


@register("paddle", "Pad", since=11)
def pad(
    call: NodeCall, x: Tensor, pads: Tensor, value: Tensor = None, axes: Tensor = None
) -> Tensor:
    """ONNX Pad (opset 11+: static pads / constant_value inputs; opset 18+: axes input)."""
    raw = _ints(_static(call, 1, "pads", pads))
    constant = 0.0 if value is None else float(np.asarray(_static(call, 2, "value", value)).item())
    rank = len(x.shape)
    if axes is not None:
        chosen = [a + rank if a < 0 else a for a in _ints(_static(call, 3, "axes", axes))]
        full = [0] * (2 * rank)
        for i, axis in enumerate(chosen):
            full[axis], full[axis + rank] = raw[i], raw[i + len(chosen)]
        raw = full
    return _pad(call, x, raw, constant, call.attr("mode", "constant"))


@register("paddle", "ConstantOfShape", since=9)
def constant_of_shape(call: NodeCall, shape: Tensor) -> Tensor:
    """ONNX ConstantOfShape (float32 values follow the graph's float dtype).

    A static shape is handed to ``paddle.full`` as a list; a shape computed at run time
    (eager execution allows it) as the int64 tensor itself.
    """
    value = call.attr("value")
    value = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value)
    static = call.const(0)
    dims = _ints(static) if static is not None else shape
    return paddle.full(dims, value.reshape(-1)[0].item(), dtype=numpy_float_dtype(value))


@register("paddle", "Range", since=11)
def range_(call: NodeCall, start: Tensor, limit: Tensor, delta: Tensor) -> Tensor:
    """ONNX Range (float32 ranges follow the graph's float dtype)."""
    values = [call.const(i) for i in range(3)]
    if all(v is not None for v in values):
        dtype = numpy_float_dtype(values[0])
        start, limit, delta = (np.asarray(v).item() for v in values)
        return paddle.arange(start, limit, delta, dtype=dtype)
    return paddle.arange(start, limit, delta, dtype=start.dtype)


@register("paddle", "Shape")
def shape_(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX Shape (only reached when the shape is not static; ``start`` / ``end`` slice it)."""
    shape = paddle.cast(paddle.shape(x), "int64")
    start, end = call.attr("start", 0), call.attr("end")
    return shape[start:end]
