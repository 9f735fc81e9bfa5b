"""Control-flow TensorFlow translators: If, Loop, Scan.

Each subgraph runs as its own program through the TensorFlow translators
(:mod:`anpred.translate.subgraphs`), traced into the enclosing graph: If is ``tf.cond``
(the branch taken directly when the condition is static), Loop is ``tf.while_loop`` with
its scan outputs collected in ``tf.TensorArray`` objects, and Scan is unrolled in Python
over the static length of its scan inputs (:mod:`anpred.translate.python_control`;
``tf.stack`` of the per-step outputs). Values cross the subgraph boundary in ONNX's layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from anpred.translate.python_control import (
    Body,
    ScanOps,
    run_scan,
    run_scan_batched,
    split_inputs,
)
from anpred.translate.registry import NodeCall
from anpred.translate.subgraphs import Subgraph
from anpred.translate.tensorflow.layout import TFValue, layout_op
from anpred.translate.tensorflow.lean_import import tf

_SCAN = ScanOps(
    rank=lambda x: x.shape.rank,
    take=lambda x, position, axis: tf.gather(x, position, axis=axis),
    stack=lambda values, axis: tf.stack(values, axis),
)
_DIRECTIONS = ("scan_input_directions",)


def _tensors(values: Sequence[TFValue]) -> list[tf.Tensor]:
    return [v.nchw() for v in values]


def _values(tensors: Sequence[tf.Tensor]) -> list[TFValue]:
    return [TFValue(t) for t in tensors]


@layout_op("If")
def if_(call: NodeCall, *args: Any) -> tuple[TFValue, ...]:
    """ONNX If: the ``then_branch`` or ``else_branch`` subgraph (``tf.cond``)."""
    (condition,), outer = split_inputs(call, args)
    branches = call.extra["subgraphs"]
    static = call.const(0)
    if static is not None:
        branch = "then_branch" if bool(np.asarray(static).reshape(-1)[0]) else "else_branch"
        return tuple(branches[branch].run([], outer))
    flag = tf.reshape(tf.cast(condition.nchw(), tf.bool), [-1])[0]
    results = tf.cond(
        flag,
        lambda: _tensors(branches["then_branch"].run([], outer)),
        lambda: _tensors(branches["else_branch"].run([], outer)),
    )
    return tuple(_values(results))


@layout_op("Loop")
def loop(call: NodeCall, *args: Any) -> tuple[TFValue, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond`` (``tf.while_loop``).

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    (trip, condition, *carried), outer = split_inputs(call, args)
    body: Subgraph = call.extra["subgraphs"]["body"]
    limit = None if trip is None else tf.cast(tf.reshape(trip.nchw(), []), tf.int64)
    going = (
        tf.constant(True)
        if condition is None
        else tf.reshape(tf.cast(condition.nchw(), tf.bool), [])
    )
    start = tf.constant(0, tf.int64)
    states = _tensors(carried)
    probe = body.run(_values([start, going, *states]), outer)  # dtypes of the scan outputs
    arrays = [
        tf.TensorArray(v.dtype, size=0, dynamic_size=True, infer_shape=False)
        for v in probe[1 + len(states) :]
    ]

    def keep_going(step: tf.Tensor, flag: tf.Tensor, *rest: Any) -> tf.Tensor:
        return flag if limit is None else tf.logical_and(flag, step < limit)

    def step_once(step: tf.Tensor, flag: tf.Tensor, *rest: Any) -> tuple[Any, ...]:
        values, stacks = list(rest[: len(states)]), list(rest[len(states) :])
        results = _tensors(body.run(_values([step, flag, *values]), outer))
        flag = tf.reshape(tf.cast(results[0], tf.bool), [])
        values = results[1 : 1 + len(values)]
        stacks = [ta.write(tf.cast(step, tf.int32), v) for ta, v in zip(
            stacks, results[1 + len(values) :], strict=True)]  # fmt: skip
        return (step + 1, flag, *values, *stacks)

    loose = [tf.TensorShape([None] * t.shape.rank) for t in states]  # shapes may vary
    invariants = (start.shape, going.shape, *loose, *[tf.TensorShape(None) for _ in arrays])
    final = tf.while_loop(
        keep_going, step_once, (start, going, *states, *arrays), shape_invariants=invariants
    )
    values = final[2 : 2 + len(states)]
    scans = [ta.stack() for ta in final[2 + len(states) :]]
    return tuple(_values([*values, *scans]))


def _body(body: Subgraph, outer: dict[str, Any]) -> Body:
    """``body`` run on tensors in ONNX's layout, across the subgraph boundary."""
    return lambda tensors: _tensors(body.run(_values(tensors), outer))


@layout_op("Scan", since=9)
def scan(call: NodeCall, *args: Any) -> tuple[TFValue, ...]:
    """ONNX Scan (opset 9+): the body over slices of the scan inputs along their axes.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).
    """
    values, outer = split_inputs(call, args)
    scanned = int(call.attr("num_scan_inputs"))
    tensors = _tensors(values)
    states, inputs = tensors[: len(tensors) - scanned], tensors[len(tensors) - scanned :]
    body = _body(call.extra["subgraphs"]["body"], outer)
    final, outputs = run_scan(call, body, states, inputs, _SCAN, _DIRECTIONS)
    return tuple(_values([*final, *outputs]))


@layout_op("Scan", since=8)
def scan_batched(call: NodeCall, *args: Any) -> tuple[TFValue, ...]:
    """ONNX Scan-8: a leading batch axis on states and scan inputs, each entry scanned.

    Only full-length sequences (``sequence_lens`` absent, or static and equal to the length).
    """
    (lengths, *values), outer = split_inputs(call, args)
    scanned = int(call.attr("num_scan_inputs"))
    tensors = _tensors(values)
    states, inputs = tensors[: len(tensors) - scanned], tensors[len(tensors) - scanned :]
    if lengths is not None:
        static = call.const(0)
        if static is None or np.any(np.asarray(static) != int(inputs[0].shape[1])):
            raise NotImplementedError("Scan-8 with sequence_lens shorter than the sequence")
    body = _body(call.extra["subgraphs"]["body"], outer)
    return tuple(_values(run_scan_batched(call, body, states, inputs, _SCAN, _DIRECTIONS)))
