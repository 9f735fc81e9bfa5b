"""Loss jax translators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Training graphs export them; an inference graph may keep one to score its outputs. jax has
no loss kernels, so both are composed: the target class's entry is picked with
``jnp.take_along_axis``, weighted, and reduced (``mean`` divides by the summed weights of
the targets that are not ``ignore_index``, as ONNX specifies); SoftmaxCrossEntropyLoss
first takes ``jax.nn.log_softmax`` over the class axis.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from anpred.translate.jax.registration import register
from anpred.translate.registry import NodeCall


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nll(call: NodeCall, log_prob: Any, target: Any, weight: Any) -> Any:
    """ONNX's negative log-likelihood of ``log_prob`` (N, C, d...) at ``target`` (N, d...)."""
    target = target.astype(jnp.int32)
    classes = log_prob.shape[1]
    keep = jnp.ones(target.shape, dtype=bool)
    ignore = call.attr("ignore_index")
    if ignore is not None:
        keep = target != int(ignore)
    index = jnp.clip(jnp.where(keep, target, 0), 0, classes - 1)
    picked = jnp.take_along_axis(log_prob, index[:, None], axis=1)[:, 0]
    w = jnp.ones(target.shape, log_prob.dtype) if weight is None else weight[index]
    w = jnp.where(keep, w, jnp.zeros((), log_prob.dtype))
    loss = -picked * w
    reduction = _text(call.attr("reduction", "mean"))
    if reduction == "none":
        return loss
    if reduction == "sum":
        return jnp.sum(loss)
    return jnp.sum(loss) / jnp.sum(w)


@register("NegativeLogLikelihoodLoss")
def nll_loss(call: NodeCall, x: Any, target: Any, weight: Any = None) -> Any:
    """ONNX NegativeLogLikelihoodLoss (weights, ``ignore_index``, reduction), composed."""
    return _nll(call, x, target, weight)


@register("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(
    call: NodeCall, scores: Any, labels: Any, weight: Any = None
) -> tuple[Any, Any]:
    """ONNX SoftmaxCrossEntropyLoss: the NLL of ``jax.nn.log_softmax`` over axis 1; the
    optional second output is the log-probabilities.
    """
    log_prob = jax.nn.log_softmax(scores, axis=1)
    return _nll(call, log_prob, labels, weight), log_prob
