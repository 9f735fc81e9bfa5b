"""Loss torch translators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Training graphs export them; an inference graph may keep one to score its outputs.
``F.nll_loss`` is the kernel of both (after ``torch.log_softmax`` for the latter).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the conventional name

from anpred.translate.registry import NodeCall, register

_LIB = "torch"

Tensor = torch.Tensor

#: torch's "no ignored class" (``F.nll_loss``'s default ``ignore_index``).
_NONE_IGNORED = -100


def _nll(call: NodeCall, log_prob: Tensor, target: Tensor, weight: Tensor | None) -> Tensor:
    ignore = call.attr("ignore_index")
    return F.nll_loss(
        log_prob,
        target.to(torch.int64),
        weight=weight,
        ignore_index=_NONE_IGNORED if ignore is None else int(ignore),
        reduction=call.attr("reduction", "mean"),
    )


@register(_LIB, "NegativeLogLikelihoodLoss")
def nll_loss(call: NodeCall, x: Tensor, target: Tensor, weight: Tensor | None = None) -> Tensor:
    """ONNX NegativeLogLikelihoodLoss: ``F.nll_loss`` (weights, ``ignore_index``, reduction)."""
    return _nll(call, x, target, weight)


@register(_LIB, "SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(
    call: NodeCall, scores: Tensor, labels: Tensor, weight: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """ONNX SoftmaxCrossEntropyLoss: ``F.nll_loss`` of ``torch.log_softmax`` over axis 1;
    the optional second output is the log-probabilities.
    """
    log_prob = torch.log_softmax(scores, dim=1)
    return _nll(call, log_prob, labels, weight), log_prob
