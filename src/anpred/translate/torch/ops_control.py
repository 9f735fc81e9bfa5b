"""Control-flow torch translators: If, Loop, Scan, as Python control flow around torch.

Each subgraph runs as its own program through the torch translators
(:mod:`anpred.translate.subgraphs`); conditions and trip counts are read back from their
tensors, which only eager execution allows (``torch.compile`` of such a graph traces one
path). Loop and Scan run as Python loops (:mod:`anpred.translate.python_control`); their
outputs that collect one slice per iteration are ``torch.stack``-ed.
"""

from __future__ import annotations

from typing import Any

import torch

from anpred.translate.python_control import (
    LoopOps,
    ScanOps,
    loop_node,
    scan_batched_node,
    scan_node,
    split_inputs,
)
from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor


def _stack(values: list[Tensor], axis: int) -> Tensor:
    return torch.stack(values, dim=axis)


_LOOP = LoopOps(
    index=lambda step: torch.tensor(step, dtype=torch.int64),
    flag=lambda going: torch.tensor(going),
    first=lambda value: value.reshape(-1)[0],
    stack=_stack,
    empty=lambda: torch.empty((0,)),
)
_SCAN = ScanOps(
    rank=lambda x: x.ndim, take=lambda x, position, axis: torch.select(x, axis, position),
    stack=_stack,
)  # fmt: skip


@register(_LIB, "If")
def if_(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX If: the ``then_branch`` or ``else_branch`` subgraph, as the condition says."""
    (condition,), outer = split_inputs(call, args)
    branch = "then_branch" if bool(condition.reshape(-1)[0]) else "else_branch"
    return tuple(call.extra["subgraphs"][branch].run([], outer))


@register(_LIB, "Loop")
def loop(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Loop: up to ``M`` iterations while ``cond``; carried values and scan outputs.

    The body takes (iteration, condition, carried ...) and returns (condition, carried ...,
    scan outputs ...); each scan output stacks its per-iteration values on a new axis 0.
    """
    return loop_node(call, args, _LOOP)


@register(_LIB, "Scan", since=9)
def scan(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan (opset 9+): the body over slices of the scan inputs along their axes.

    States are carried from one iteration to the next; each scan output stacks its
    per-iteration values along its ``scan_output_axes`` axis (reversed for direction 1).
    """
    return scan_node(call, args, _SCAN)


@register(_LIB, "Scan", since=8)
def scan_batched(call: NodeCall, *args: Any) -> tuple[Any, ...]:
    """ONNX Scan-8: a leading batch axis on states and scan inputs, each entry scanned.

    Only full-length sequences (``sequence_lens`` absent or equal to the length).
    """
    return scan_batched_node(call, args, _SCAN)
