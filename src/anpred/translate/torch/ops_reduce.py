"""Reduction torch translators: ReduceMean, ReduceSum, ReduceMax.

Axes come from the ``axes`` attribute (ReduceMean/ReduceMax before opset 18) or from the
second input (ReduceSum from opset 13, all of them from opset 18); no axes means all axes,
or the identity with ``noop_with_empty_axes``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor


def _reduction(reduce: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def translate(call: NodeCall, x: Tensor, axes: Tensor | None = None) -> Tensor:
        static_axes = call.const(1)
        if axes is not None and static_axes is None:
            raise NotImplementedError(f"{call.op_type} with run-time axes is not supported")
        chosen = static_axes if static_axes is not None else call.attr("axes")
        keepdims = bool(call.attr("keepdims", 1))
        if chosen is None or len(chosen) == 0:
            if call.attr("noop_with_empty_axes", 0):
                return x
            chosen = range(x.ndim)
        dims = tuple(int(a) % x.ndim for a in chosen) if x.ndim else ()
        return reduce(x, dim=dims, keepdim=keepdims)

    return translate


register(_LIB, "ReduceMean")(_reduction(torch.mean))
register(_LIB, "ReduceSum")(_reduction(torch.sum))
register(_LIB, "ReduceMax")(_reduction(torch.amax))
