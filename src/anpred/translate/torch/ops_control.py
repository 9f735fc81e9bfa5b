"""Control-flow torch translators: If, Loop, Scan, as Python control flow around torch.

Each subgraph runs as its own program through the torch translators
(:mod:`anpred.translate.subgraphs`); conditions and trip counts are read back from their
tensors, which only eager execution allows (``torch.compile`` of such a graph traces one
path). Loop and Scan outputs that collect one slice per iteration are ``torch.stack``-ed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from anpred.translate.registry import NodeCall, register
from anpred.translate.subgraphs import Subgraph

_LIB = "torch"

Tensor = torch.Tensor


def _split(call: NodeCall, args: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The node's own inputs, and the enclosing graph's values its subgraphs read, by name."""
    own = len(call.consts)
    subgraphs: dict[str, Subgraph] = call.extra["subgraphs"]
    names = list(dict.fromkeys(n for sub in subgraphs.values() for n in sub.outer))
    return list(args[:own]), dict(zip(names, args[own:], strict=True))


@register(_LIB, "If")
def if_(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX If: the ``then_branch`` or ``else_branch`` subgraph, as the condition says."""
    (condition,), outer = _split(call, args)
    branch = "then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"
    return tuple(call.extra["subgraphs"][branch].run([], outer))


def _stacked(slices: list[Tensor], axis: int = 0) -> Tensor:
    if not slices:
        return torch.empty((0,))
    return torch.stack(slices, dim=axis)


@register(_LIB, "Loop")
def loop(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond``; carried values and scan outputs.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    (trip, condition, *carried), outer = _split(call, args)
    body: Subgraph = call.extra["subgraphs"]["body"]
    limit = None if trip is None else int(trip.reshape(-1)[0])
    going = True if condition is None else bool(condition.reshape(-1)[0])
    scans: list[list[Tensor]] = []
    step = 0
    while going and (limit is None or step < limit):
        counter = torch.tensor(step, dtype=torch.int64)
        flag = torch.tensor(going)
        results = body.run([counter, flag, *carried], outer)
        going = bool(results[0].reshape(-1)[0])
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
    inputs: list[Tensor], axis_offset: int,
) -> tuple[list[Tensor], list[Tensor]]:  # fmt: skip
    """One scan over ``inputs`` (axes from ``scan_input_axes``, shifted by ``axis_offset``)."""
    count = len(inputs)
    in_axes = [int(a) for a in call.attr("scan_input_axes", [0] * count)]
    directions = call.attr("scan_input_directions", call.attr("directions", [0] * count))
    axes = [
        (a % (x.ndim - axis_offset)) + axis_offset for a, x in zip(in_axes, inputs, strict=True)
    ]
    length = inputs[0].shape[axes[0]] if inputs else 0
    collected: list[list[Tensor]] = []
    for t in range(length):
        slices = [
            torch.select(x, axis, length - 1 - t if int(direction) else t)
            for x, axis, direction in zip(inputs, axes, [int(d) for d in directions], strict=True)
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
        rank = bucket[0].ndim + 1
        outputs.append(_stacked(bucket, int(axis) % rank))
    return states, outputs


@register(_LIB, "Scan", since=9)
def scan(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan (opset 9+): the body over slices of the scan inputs along their axes.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).
    """
    values, outer = _split(call, args)
    scanned = int(call.attr("num_scan_inputs"))
    states, inputs = values[: len(values) - scanned], values[len(values) - scanned :]
    final, outputs = _scan(call, call.extra["subgraphs"]["body"], outer, states, inputs, 0)
    return (*final, *outputs)


@register(_LIB, "Scan", since=8)
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
        _scan(call, body, outer, [s[b] for s in states], [x[b] for x in inputs], 0)
        for b in range(inputs[0].shape[0])
    ]
    finals = [torch.stack([entry[0][i] for entry in per_entry]) for i in range(len(states))]
    count = len(per_entry[0][1]) if per_entry else 0
    outputs = [torch.stack([entry[1][i] for entry in per_entry]) for i in range(count)]
    return (*finals, *outputs)
