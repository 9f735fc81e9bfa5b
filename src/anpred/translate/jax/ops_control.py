"""Control-flow jax translators: If, Loop, Scan.

Each subgraph runs as its own program through the jax translators
(:mod:`anpred.translate.subgraphs`), inside the enclosing graph's trace. An ``If`` whose
condition is known while tracing (a constant, or shape arithmetic) runs one branch (under
``jax.ensure_compile_time_eval``, so that the values it folds stay known to what follows); a
run-time condition becomes ``lax.cond`` (both branches must then give the same shapes and
dtypes). Loop and Scan are unrolled in Python over their static lengths (jax programs have
static shapes; :mod:`anpred.translate.python_control`), a Loop's condition must be known
while tracing; their per-iteration outputs are ``jnp.stack``-ed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from anpred.errors import UsageError
from anpred.translate.jax.numerics import index_dtype
from anpred.translate.jax.registration import register
from anpred.translate.python_control import (
    LoopOps,
    ScanOps,
    body_runner,
    run_loop,
    run_scan_batched,
    scan_node,
    scan_operands,
    split_inputs,
)
from anpred.translate.registry import NodeCall
from anpred.translate.subgraphs import Subgraph

_DIRECTIONS = ("scan_input_directions",)  # Scan-8's ``directions`` renamed by the caller


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
    (condition,), outer = split_inputs(call, args)
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


def _flag(value: Any, what: str, call: NodeCall) -> bool:
    if isinstance(value, jax.core.Tracer):
        raise UsageError(
            f"Loop node {call.name}: the {what} must be known while tracing (jax unrolls "
            "loops over static trip counts)"
        )
    return bool(np.asarray(value).reshape(-1)[0])


def _stack(values: list[Any], axis: int) -> Any:
    return jnp.stack(values, axis=axis)


def _loop_ops(call: NodeCall) -> LoopOps:
    """The tensor primitives in jax; a condition read back names ``call`` when traced."""
    return LoopOps(
        index=lambda step: np.asarray(step, dtype=index_dtype()),
        flag=lambda going: np.asarray(going),
        first=lambda value: _flag(value, "condition", call),
        stack=_stack,
        empty=lambda: jnp.zeros((0,), jnp.float32),
    )


_SCAN = ScanOps(
    rank=lambda x: x.ndim, take=lambda x, position, axis: jnp.take(x, position, axis=axis),
    stack=_stack,
)  # fmt: skip


@register("Loop")
def loop(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond``; carried values and scan outputs.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    (trip, condition, *carried), outer = split_inputs(call, args)
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
    count = len(body.program.outputs) - 1 - len(carried)
    return run_loop(body_runner(call, outer), limit, going, carried, count, _loop_ops(call))


@register("Scan", since=9)
def scan(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan (opset 9+): the body over slices of the scan inputs along their axes.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).
    """
    return scan_node(call, args, _SCAN, _DIRECTIONS)


@register("Scan", since=8)
def scan_batched(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan-8: a leading batch axis on states and scan inputs, each entry scanned
    (``directions`` is Scan-8's name of ``scan_input_directions``).

    Only full-length sequences (``sequence_lens`` absent or equal to the length).
    """
    (lengths, *values), outer = split_inputs(call, args)
    states, inputs = scan_operands(call, values)
    known = _known(call, 0, lengths)
    if lengths is not None and (known is None or np.any(known != inputs[0].shape[1])):
        raise UsageError(f"Scan node {call.name}: sequence_lens shorter than the sequence")
    if call.attr("directions") is not None:
        call = _with_directions(call)
    return run_scan_batched(call, body_runner(call, outer), states, inputs, _SCAN, _DIRECTIONS)


def _with_directions(call: NodeCall) -> NodeCall:
    attrs = {**call.attrs, "scan_input_directions": call.attr("directions")}
    return dataclasses.replace(call, attrs=attrs)
