"""Control-flow paddle translators: If, Loop, Scan, as Python control flow around paddle;
OptionalHasElement / OptionalGetElement of tensors.

Each subgraph runs as its own program through the paddle translators
(:mod:`anpred.translate.subgraphs`); conditions and trip counts are read back from their
tensors, which only eager (dynamic-graph) execution allows: paddle's static-graph
``cond`` / ``while_loop`` need the bodies as Python callables of a fixed signature, which
an ONNX subgraph with outer-scope reads and scan outputs is not. Loop and Scan run as
Python loops (:mod:`anpred.translate.python_control`); their outputs that collect one
slice per iteration are ``paddle.stack``-ed.
"""

from __future__ import annotations

from typing import Any

import paddle

from anpred.translate.python_control import (
    LoopOps,
    ScanOps,
    loop_node,
    scan_batched_node,
    scan_node,
    split_inputs,
)
from anpred.translate.registry import NodeCall, register

Tensor = Any


def _first(value: Tensor) -> Any:
    return paddle.reshape(value, [-1])[0].item()


def _take(x: Tensor, position: int, axis: int) -> Tensor:
    return paddle.squeeze(paddle.slice(x, [axis], [position], [position + 1]), axis=[axis])


def _stack(values: list[Tensor], axis: int) -> Tensor:
    return paddle.stack(values, axis=axis)


_LOOP = LoopOps(
    index=lambda step: paddle.to_tensor(step, dtype="int64"),
    flag=lambda going: paddle.to_tensor(going),
    first=_first,
    stack=_stack,
    empty=lambda: paddle.zeros([0]),
)
_SCAN = ScanOps(rank=lambda x: x.ndim, take=_take, stack=_stack)


@register("paddle", "If")
def if_(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX If: the ``then_branch`` or ``else_branch`` subgraph, as the condition says."""
    (condition,), outer = split_inputs(call, args)
    branch = "then_branch" if bool(_first(condition)) else "else_branch"
    return tuple(call.extra["subgraphs"][branch].run([], outer))


@register("paddle", "Loop")
def loop(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond``; carried values and scan outputs.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    return loop_node(call, args, _LOOP)


@register("paddle", "Scan", since=9)
def scan(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan (opset 9+): the body over slices of the scan inputs along their axes.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).
    """
    return scan_node(call, args, _SCAN)


@register("paddle", "Scan", since=8)
def scan_batched(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan-8: a leading batch axis on states and scan inputs, each entry scanned.

    Only full-length sequences (``sequence_lens`` absent or equal to the length).
    """
    return scan_batched_node(call, args, _SCAN)


@register("paddle", "OptionalHasElement", since=15)
def optional_has_element(call: NodeCall, x: Tensor = None) -> Tensor:
    """ONNX OptionalHasElement: whether the (tensor or omitted) input holds a value."""
    return paddle.to_tensor(x is not None)


@register("paddle", "OptionalGetElement", since=15)
def optional_get_element(call: NodeCall, x: Tensor) -> Tensor:
    """ONNX OptionalGetElement of a tensor: the tensor itself."""
    return x
