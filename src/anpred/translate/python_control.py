"""ONNX Loop and Scan run as Python loops around a library's tensors.

The translators that cannot (or do not) express a Loop or Scan in their library's own
control flow run the body subgraph once per iteration from Python: torch and paddle
(eager execution reads the conditions back), jax (unrolled over static lengths while
tracing) and TensorFlow's Scan (unrolled over the static length of its scan inputs). What
they share is here; each library supplies only its tensor primitives (:class:`LoopOps`,
:class:`ScanOps`) and a function that runs the body on a list of its values. The library
modules' docstrings say which library runs what this way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from anpred.translate.registry import NodeCall
from anpred.translate.subgraphs import Subgraph

Body = Callable[[list[Any]], list[Any]]
"""Runs a body subgraph on its inputs (library values) and returns its outputs."""


@dataclass(frozen=True)
class LoopOps:
    """The tensor primitives of one library that a Python Loop needs.

    Attributes:
        index: The int64 (index-typed) scalar tensor of an iteration number.
        flag: The bool scalar tensor of a condition.
        first: The first element of a tensor (a condition, a trip count), as a value
            ``bool()`` and ``int()`` accept.
        stack: ``(values, axis)``: the values stacked on a new ``axis``.
        empty: The empty 1-D tensor of a scan output that collected nothing.
    """

    index: Callable[[int], Any]
    flag: Callable[[bool], Any]
    first: Callable[[Any], Any]
    stack: Callable[[list[Any], int], Any]
    empty: Callable[[], Any]


@dataclass(frozen=True)
class ScanOps:
    """The tensor primitives of one library that a Python Scan needs.

    Attributes:
        rank: The number of axes of a tensor.
        take: ``(x, position, axis)``: the slice of ``x`` at ``position`` along ``axis``,
            without that axis.
        stack: ``(values, axis)``: the values stacked on a new ``axis``.
    """

    rank: Callable[[Any], int]
    take: Callable[[Any, int, int], Any]
    stack: Callable[[list[Any], int], Any]


def split_inputs(call: NodeCall, args: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The node's own inputs, and the enclosing graph's values its subgraphs read, by name."""
    own = len(call.consts)
    subgraphs: dict[str, Subgraph] = call.extra["subgraphs"]
    names = list(dict.fromkeys(n for sub in subgraphs.values() for n in sub.outer))
    return list(args[:own]), dict(zip(names, args[own:], strict=True))


def body_runner(call: NodeCall, outer: dict[str, Any]) -> Body:
    """The node's ``body`` subgraph run with the enclosing graph's values ``outer``."""
    body: Subgraph = call.extra["subgraphs"]["body"]
    return lambda values: body.run(values, outer)


def scan_operands(call: NodeCall, values: list[Any]) -> tuple[list[Any], list[Any]]:
    """A Scan's (states, scan inputs): the last ``num_scan_inputs`` values are scanned."""
    scanned = int(call.attr("num_scan_inputs"))
    return values[: len(values) - scanned], values[len(values) - scanned :]


def loop_node(call: NodeCall, args: Sequence[Any], ops: LoopOps) -> tuple[Any, ...]:
    """ONNX Loop of a library that reads its trip count and condition back (eager).

    Args:
        call: The Loop node.
        args: Its translator's arguments (node inputs, then the outer values).
        ops: The library's tensor primitives.
    """
    (trip, condition, *carried), outer = split_inputs(call, args)
    limit = None if trip is None else int(ops.first(trip))
    going = True if condition is None else bool(ops.first(condition))
    count = len(call.extra["subgraphs"]["body"].program.outputs) - 1 - len(carried)
    return run_loop(body_runner(call, outer), limit, going, carried, count, ops)


def scan_node(
    call: NodeCall, args: Sequence[Any], ops: ScanOps,
    direction_attrs: Sequence[str] = ("scan_input_directions", "directions"),
) -> tuple[Any, ...]:  # fmt: skip
    """ONNX Scan-9+ of a library whose values cross the subgraph boundary unchanged.

    Returns:
        The final states, then the scan outputs (:func:`run_scan`).
    """
    values, outer = split_inputs(call, args)
    states, inputs = scan_operands(call, values)
    final, outputs = run_scan(call, body_runner(call, outer), states, inputs, ops, direction_attrs)
    return (*final, *outputs)


def scan_batched_node(call: NodeCall, args: Sequence[Any], ops: ScanOps) -> tuple[Any, ...]:
    """ONNX Scan-8 of a library that reads ``sequence_lens`` back (eager).

    Only full-length sequences (``sequence_lens`` absent or equal to the length).

    Returns:
        The final states, then the scan outputs (:func:`run_scan_batched`).
    """
    (lengths, *values), outer = split_inputs(call, args)
    states, inputs = scan_operands(call, values)
    if lengths is not None and bool((lengths != inputs[0].shape[1]).any()):
        raise NotImplementedError("Scan-8 with sequence_lens shorter than the sequence")
    return run_scan_batched(call, body_runner(call, outer), states, inputs, ops)


def run_loop(
    body: Body, limit: int | None, going: bool, carried: list[Any], scan_outputs: int,
    ops: LoopOps,
) -> tuple[Any, ...]:  # fmt: skip
    """ONNX Loop: up to ``limit`` iterations (unbounded when ``None``) while ``going``.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0
    (``ops.empty()`` when the body never ran; ``scan_outputs`` says how many there are).

    Returns:
        The final carried values, then the scan outputs.
    """
    scans: list[list[Any]] = []
    step = 0
    while going and (limit is None or step < limit):
        results = body([ops.index(step), ops.flag(going), *carried])
        going = bool(ops.first(results[0]))
        carried = results[1 : 1 + len(carried)]
        extra = results[1 + len(carried) :]
        if not scans:
            scans = [[] for _ in extra]
        for collected, value in zip(scans, extra, strict=True):
            collected.append(value)
        step += 1
    outputs = [ops.stack(c, 0) if c else ops.empty() for c in scans]
    return (*carried, *(outputs or [ops.empty()] * scan_outputs))


def run_scan(
    call: NodeCall, body: Body, states: list[Any], inputs: list[Any], ops: ScanOps,
    direction_attrs: Sequence[str] = ("scan_input_directions", "directions"),
) -> tuple[list[Any], list[Any]]:  # fmt: skip
    """One ONNX Scan over ``inputs`` along their ``scan_input_axes``.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).

    Args:
        call: The Scan node (its ``scan_*_axes`` and ``scan_*_directions`` attributes).
        body: Runs the body on (states ..., one slice of each scan input ...).
        states: Initial state values.
        inputs: Scan inputs.
        ops: The library's tensor primitives.
        direction_attrs: Attributes read, the first one set wins, for the input directions
            (Scan-8 names them ``directions``).

    Returns:
        The final states and the stacked scan outputs.
    """
    count = len(inputs)
    in_axes = [int(a) for a in call.attr("scan_input_axes", [0] * count)]
    directions = next(
        (call.attr(name) for name in direction_attrs if call.attr(name) is not None),
        [0] * count,
    )
    axes = [a % ops.rank(x) for a, x in zip(in_axes, inputs, strict=True)]
    length = int(inputs[0].shape[axes[0]]) if inputs else 0
    collected: list[list[Any]] = []
    for t in range(length):
        slices = [
            ops.take(x, length - 1 - t if direction else t, axis)
            for x, axis, direction in zip(inputs, axes, [int(d) for d in directions], strict=True)
        ]
        results = body([*states, *slices])
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
        outputs.append(ops.stack(bucket, int(axis) % (ops.rank(bucket[0]) + 1)))
    return states, outputs


def run_scan_batched(
    call: NodeCall, body: Body, states: list[Any], inputs: list[Any], ops: ScanOps,
    direction_attrs: Sequence[str] = ("scan_input_directions", "directions"),
) -> tuple[Any, ...]:  # fmt: skip
    """ONNX Scan-8: :func:`run_scan` of each entry of the leading batch axis, restacked.

    Returns:
        The final states, then the scan outputs, each with the batch axis first.
    """
    per_entry = [
        run_scan(call, body, [s[b] for s in states], [x[b] for x in inputs], ops, direction_attrs)
        for b in range(int(inputs[0].shape[0]))
    ]
    finals = [ops.stack([entry[0][i] for entry in per_entry], 0) for i in range(len(states))]
    count = len(per_entry[0][1]) if per_entry else 0
    outputs = [ops.stack([entry[1][i] for entry in per_entry], 0) for i in range(count)]
    return (*finals, *outputs)
