"""Control-flow paddle translators: If, Loop, Scan, as Python control flow around paddle;
OptionalHasElement / OptionalGetElement of tensors.

Each subgraph runs as its own program through the paddle translators
(:mod:`anpred.translate.subgraphs`); conditions and trip counts are read back from their
tensors, which only eager (dynamic-graph) execution allows: paddle's static-graph
``cond`` / ``while_loop`` need the bodies as Python callables of a fixed signature, which
an ONNX subgraph with outer-scope reads and scan outputs is not. Loop and Scan outputs
that collect one slice per iteration are ``paddle.stack``-ed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import paddle

from anpred.translate.registry import NodeCall, register
from anpred.translate.subgraphs import Subgraph

Tensor = Any


def _split(call: NodeCall, args: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The node's own inputs, and the enclosing graph's values its subgraphs read, by name."""
    own = len(call.consts)
    subgraphs: dict[str, Subgraph] = call.extra["subgraphs"]
    names = list(dict.fromkeys(n for sub in subgraphs.values() for n in sub.outer))
    return list(args[:own]), dict(zip(names, args[own:], strict=True))


def _flag(value: Tensor) -> bool:
    return bool(paddle.reshape(value, [-1])[0].item())


@register("paddle", "If")
def if_(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX If: the ``then_branch`` or ``else_branch`` subgraph, as the condition says."""
    (condition,), outer = _split(call, args)
    branch = "then_branch" if _flag(condition) else "else_branch"
    return tuple(call.extra["subgraphs"][branch].run([], outer))


def _stacked(slices: list[Tensor], axis: int = 0) -> Tensor:
    if not slices:
        return paddle.zeros([0])
    return paddle.stack(slices, axis=axis)


@register("paddle", "Loop")
def loop(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond``; carried values and scan outputs.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    (trip, condition, *carried), outer = _split(call, args)
    body: Subgraph = call.extra["subgraphs"]["body"]
    limit = None if trip is None else int(paddle.reshape(trip, [-1])[0].item())
    going = True if condition is None else _flag(condition)
    scans: list[list[Tensor]] = []
    step = 0
    while going and (limit is None or step < limit):
        counter = paddle.to_tensor(step, dtype="int64")
        flag = paddle.to_tensor(going)
        results = body.run([counter, flag, *carried], outer)
        going = _flag(results[0])
        carried = results[1 : 1 + len(carried)]
        extra = results[1 + len(carried) :]
        if not scans:
            scans = [[] for _ in extra]
        for collected, value in zip(scans, extra, strict=True):
            collected.append(value)
        step += 1
    count = len(body.program.outputs) - 1 - len(carried)
    outputs = [_stacked(collected) for collected in scans] or [_stacked([])] * count
    return (*carried, *outputs)


def _scan(
    call: NodeCall, body: Subgraph, outer: dict[str, Any], states: list[Tensor],
    inputs: list[Tensor],
) -> tuple[list[Tensor], list[Tensor]]:  # fmt: skip
    """One scan over ``inputs`` along their ``scan_input_axes``."""
    count = len(inputs)
    in_axes = [int(a) for a in call.attr("scan_input_axes", [0] * count)]
    directions = call.attr("scan_input_directions", call.attr("directions", [0] * count))
    axes = [a % x.ndim for a, x in zip(in_axes, inputs, strict=True)]
    length = int(inputs[0].shape[axes[0]]) if inputs else 0
    collected: list[list[Tensor]] = []
    for t in range(length):
        slices = [
            paddle.squeeze(paddle.slice(x, [axis], [p], [p + 1]), axis=[axis])
            for x, axis, p in (
                (x, axis, length - 1 - t if int(direction) else t)
                for x, axis, direction in zip(inputs, axes, directions, strict=True)
            )
        ]
        results = body.run([*states, *slices], outer)
        states = results[: len(states)]
        if not collected:
            collected = [[] for _ in results[len(states) :]]
        for bucket, value in zip(collected, results[len(states) :], strict=True):
            bucket.append(value)
    outputs = []
    out_axes = call.attr("scan_output_axes", [0] * len(collected))
    out_directions = call.attr("scan_output_directions", [0] * len(collected))
    for bucket, axis, direction in zip(collected, out_axes, out_directions, strict=True):
        if int(direction):
            bucket = bucket[::-1]
        outputs.append(_stacked(bucket, int(axis) % (bucket[0].ndim + 1)))
    return states, outputs


@register("paddle", "Scan", since=9)
def scan(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan (opset 9+): the body over slices of the scan inputs along their axes.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).
    """
    values, outer = _split(call, args)
    scanned = int(call.attr("num_scan_inputs"))
    states, inputs = values[: len(values) - scanned], values[len(values) - scanned :]
    final, outputs = _scan(call, call.extra["subgraphs"]["body"], outer, states, inputs)
    return (*final, *outputs)


@register("paddle", "Scan", since=8)
def scan_batched(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan-8: a leading batch axis on states and scan inputs, each entry scanned.

    Only full-length sequences (``sequence_lens`` absent or equal to the length).
    """
    (lengths, *values), outer = _split(call, args)
    scanned = int(call.attr("num_scan_inputs"))
    states, inputs = values[: len(values) - scanned], values[len(values) - scanned :]
    if lengths is not None and bool((lengths != inputs[0].shape[1]).any()):
        raise NotImplementedError("Scan-8 with sequence_lens shorter than the sequence")
    body = call.extra["subgraphs"]["body"]
    per_entry = [
        _scan(call, body, outer, [s[b] for s in states], [x[b] for x in inputs])
        for b in range(int(inputs[0].shape[0]))
    ]
    finals = [paddle.stack([entry[0][i] for entry in per_entry]) for i in range(len(states))]
    count = len(per_entry[0][1]) if per_entry else 0
    outputs = [paddle.stack([entry[1][i] for entry in per_entry]) for i in range(count)]
    return (*finals, *outputs)


@register("paddle", "OptionalHasElement", since=15)
def optional_has_element(call: NodeCall, x: Tensor = None) -> Tensor:
    """ONNX OptionalHasElement: whether the (tensor or omitted) input holds a value."""
    return paddle.to_tensor(x is not None)


@register("paddle", "OptionalGetElement", since=15)
def optional_get_element(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX OptionalGetElement of a tensor: the tensor itself."""
    return x
