"""Control-flow jax translators: If, Loop, Scan.

Each subgraph runs as its own program through the jax translators
(:mod:`anpred.translate.subgraphs`), inside the enclosing graph's trace. An ``If`` whose
condition is known while tracing (a constant, or shape arithmetic) runs one branch (under
``jax.ensure_compile_time_eval``, so that the values it folds stay known to what follows); a
run-time condition becomes ``lax.cond`` (both branches must then give the same shapes and
dtypes). Loop and Scan are unrolled in Python over their static lengths (jax programs have
static shapes), a Loop's condition must be known while tracing; their per-iteration outputs
are ``jnp.stack``-ed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from anpred.errors import UsageError
from anpred.translate.jax.numerics import index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall
from anpred.translate.subgraphs import Subgraph


def _split(call: NodeCall, args: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The node's own inputs, and the enclosing graph's values its subgraphs read, by name."""
    own = len(call.consts)
    subgraphs: dict[str, Subgraph] = call.extra["subgraphs"]
    names = list(dict.fromkeys(n for sub in subgraphs.values() for n in sub.outer))
    return list(args[:own]), dict(zip(names, args[own:], strict=True))


def _known(call: NodeCall, index: int, value: Any) -> np.ndarray | None:
    """The value of input ``index`` if known while tracing, else ``None``."""
    if call.const(index) is not None:
        return np.asarray(call.const(index))
    if value is None or isinstance(value, jax.core.Tracer):
        return None
    return np.asarray(value)


@register("If")
def if_(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX If: the ``then_branch`` or ``else_branch`` subgraph, as the condition says."""
    (condition,), outer = _split(call, args)
    branches = call.extra["subgraphs"]
    known = _known(call, 0, condition)
    if known is not None:
        branch = "then_branch" if bool(known.reshape(-1)[0]) else "else_branch"
        with jax.ensure_compile_time_eval():  # values the branch folds stay known
            return tuple(branches[branch].run([], outer))
    return tuple(
        lax.cond(
            jnp.reshape(condition, (-1,))[0],
            lambda: tuple(branches["then_branch"].run([], outer)),
            lambda: tuple(branches["else_branch"].run([], outer)),
        )
    )


def _stacked(slices: list[Any], axis: int = 0) -> Any:
    return jnp.stack(slices, axis=axis) if slices else jnp.zeros((0,), jnp.float32)


def _flag(value: Any, what: str, call: NodeCall) -> bool:
    if isinstance(value, jax.core.Tracer):
        raise UsageError(
            f"Loop node {call.name}: the {what} must be known while tracing (jax unrolls "
            "loops over static trip counts)"
        )
    return bool(np.asarray(value).reshape(-1)[0])


@register("Loop")
def loop(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond``; carried values and scan outputs.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    (trip, condition, *carried), outer = _split(call, args)
    body: Subgraph = call.extra["subgraphs"]["body"]
    known_trip = _known(call, 0, trip)
    if trip is not None and known_trip is None:
        _flag(trip, "trip count", call)
    limit = None if known_trip is None else int(known_trip.reshape(-1)[0])
    going = (
        True
        if condition is None
        else _flag(
            condition if _known(call, 1, condition) is None else _known(call, 1, condition),
            "condition",
            call,
        )
    )
    scans: list[list[Any]] = []
    step = 0
    while going and (limit is None or step < limit):
        counter = np.asarray(step, dtype=index_dtype())
        results = body.run([counter, np.asarray(going), *carried], outer)
        going = _flag(results[0], "condition", call)
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
    call: NodeCall, body: Subgraph, outer: dict[str, Any], states: list[Any], inputs: list[Any]
) -> tuple[list[Any], list[Any]]:
    """One scan over ``inputs`` (axes from ``scan_input_axes``)."""
    count = len(inputs)
    in_axes = [int(a) for a in call.attr("scan_input_axes", [0] * count)]
    directions = [int(d) for d in call.attr("scan_input_directions", [0] * count)]
    axes = [a % x.ndim for a, x in zip(in_axes, inputs, strict=True)]
    length = inputs[0].shape[axes[0]] if inputs else 0
    collected: list[list[Any]] = []
    for t in range(length):
        slices = [
            jnp.take(x, length - 1 - t if direction else t, axis=axis)
            for x, axis, direction in zip(inputs, axes, directions, strict=True)
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


@register("Scan", since=9)
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


@register("Scan", since=8)
def scan_batched(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan-8: a leading batch axis on states and scan inputs, each entry scanned
    (``directions`` is Scan-8's name of ``scan_input_directions``).

    Only full-length sequences (``sequence_lens`` absent or equal to the length).
    """
    (lengths, *values), outer = _split(call, args)
    scanned = int(call.attr("num_scan_inputs"))
    states, inputs = values[: len(values) - scanned], values[len(values) - scanned :]
    known = _known(call, 0, lengths)
    if lengths is not None and (known is None or np.any(known != inputs[0].shape[1])):
        raise UsageError(f"Scan node {call.name}: sequence_lens shorter than the sequence")
    if call.attr("directions") is not None:
        call = _with_directions(call)
    body = call.extra["subgraphs"]["body"]
    per_entry = [
        _scan(call, body, outer, [s[b] for s in states], [x[b] for x in inputs])
        for b in range(inputs[0].shape[0])
    ]
    finals = [jnp.stack([entry[0][i] for entry in per_entry]) for i in range(len(states))]
    count = len(per_entry[0][1]) if per_entry else 0
    outputs = [jnp.stack([entry[1][i] for entry in per_entry]) for i in range(count)]
    return (*finals, *outputs)


def _with_directions(call: NodeCall) -> NodeCall:
    import dataclasses

    attrs = {**call.attrs, "scan_input_directions": call.attr("directions")}
    return dataclasses.replace(call, attrs=attrs)
