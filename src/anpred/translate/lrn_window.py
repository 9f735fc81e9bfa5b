"""ONNX LRN's channel window and attributes (pure arithmetic, no tensors).

ONNX LRN (opset 1-13): ``square_sum[c] = sum(x[i]^2)`` over channels
``i in [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]`` (clipped to the tensor),
``y = x / (bias + alpha / size * square_sum) ** beta``; alpha 1e-4, beta 0.75, bias 1.0
by default (float32 attributes). For an odd ``size`` the window is symmetric, which is what
the libraries' own LRN kernels (torch, paddle, ``tf.nn.local_response_normalization``)
compute; an even ``size`` puts the extra channel after ``c`` in ONNX and before it in
torch and paddle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from anpred.translate.registry import NodeCall


@dataclass(frozen=True)
class LrnWindow:
    """LRN parameters of one node.

    Attributes:
        size: Number of channels summed.
        alpha: Scale (the sum is multiplied by ``alpha / size``).
        beta: Exponent.
        bias: Additive constant.
        before: Channels before ``c`` in the window.
        after: Channels after ``c`` in the window.
    """

    size: int
    alpha: float
    beta: float
    bias: float
    before: int
    after: int

    @property
    def symmetric(self) -> bool:
        """Whether the window is centred (odd ``size``): the libraries' kernels apply."""
        return self.before == self.after


def lrn_window(call: NodeCall) -> LrnWindow:
    """Return the LRN parameters of ``call`` (float attributes rounded to float32)."""
    size = int(call.attr("size"))
    return LrnWindow(
        size=size,
        alpha=float(np.float32(call.attr("alpha", 1e-4))),
        beta=float(np.float32(call.attr("beta", 0.75))),
        bias=float(np.float32(call.attr("bias", 1.0))),
        before=(size - 1) // 2,
        after=size - 1 - (size - 1) // 2,
    )
